// The views as Prometheus series: trained edges per trainer as a counter
// labelled by trainer and node, bytes per node pair; a total reported lower
// (a node restarted) leaves the counter where it was.
#include <doctest/doctest.h>

#include <sstream>

#include <prometheus/text_serializer.h>

#include "actors/metrics.h"

using json = nlohmann::json;

namespace {

std::string exposition(prometheus::Registry& r) {
  std::ostringstream out;
  prometheus::TextSerializer{}.Serialize(out, r.Collect());
  return out.str();
}

json trainers(std::int64_t edges) {
  return {{"trainers", {{{"trainer", 1}, {"node", "b"}, {"edges_trained", edges}, {"buckets_trained", 3},
                         {"state", "training"}, {"loss_per_edge", 0.5}, {"run_lock_wait_seconds", 1.25},
                         {"run_fetch_seconds", 2.5}, {"run_kernel_seconds", 10}, {"run_partitions_loaded", 7},
                         {"mrr_after", 0.75}}}}};
}

} // namespace

TEST_CASE("metrics: views to counters and gauges; counters never go down") {
  prometheus::Registry registry;
  abg::actors::run_metrics m(registry);
  const json nodes = {{"iteration", 4}, {"iterations", 10}, {"epoch", 4},
                      {"nodes", {{{"name", "a"}, {"state", "alive"}, {"rss_bytes", 1000}}, {{"name", "b"}, {"state", "lost"}}}}};
  const json traffic = {{"nodes",
                         {{{"node", "a"},
                           {"sent", {{"swaps", 10}, {"control", 5}}},
                           {"sent_messages", {{"swaps", 3}, {"parameters", 2}}}}}},
                        {"pairs", {{{"from", "a"}, {"to", "b"}, {"bytes", 77}, {"messages", 6}}}}};
  m.update(nodes, trainers(500), traffic, json::object());
  auto text = exposition(registry);
  CHECK(text.find("abg_trained_edges_total{node=\"b\",trainer=\"1\"} 500") != std::string::npos);
  CHECK(text.find("abg_trainer_training{node=\"b\",trainer=\"1\"} 1") != std::string::npos);
  CHECK(text.find("abg_trainer_lock_wait_seconds_total{node=\"b\",trainer=\"1\"} 1.25") != std::string::npos);
  CHECK(text.find("abg_trainer_fetch_seconds_total{node=\"b\",trainer=\"1\"} 2.5") != std::string::npos);
  CHECK(text.find("abg_trainer_kernel_seconds_total{node=\"b\",trainer=\"1\"} 10") != std::string::npos);
  CHECK(text.find("abg_trainer_partitions_loaded_total{node=\"b\",trainer=\"1\"} 7") != std::string::npos);
  CHECK(text.find("abg_trainer_held_out_mrr{node=\"b\",trainer=\"1\"} 0.75") != std::string::npos);
  CHECK(text.find("abg_node_up{node=\"a\"} 1") != std::string::npos);
  CHECK(text.find("abg_node_up{node=\"b\"} 0") != std::string::npos);
  CHECK(text.find("abg_node_rss_bytes{node=\"a\"} 1000") != std::string::npos);
  CHECK(text.find("abg_pair_bytes_total{from=\"a\",to=\"b\"} 77") != std::string::npos);
  CHECK(text.find("abg_node_sent_bytes_total{node=\"a\",purpose=\"control\"} 5") != std::string::npos);
  CHECK(text.find("abg_node_sent_messages_total{node=\"a\",purpose=\"swaps\"} 3") != std::string::npos);
  CHECK(text.find("abg_node_sent_messages_total{node=\"a\",purpose=\"parameters\"} 2") != std::string::npos);
  CHECK(text.find("abg_pair_messages_total{from=\"a\",to=\"b\"} 6") != std::string::npos);
  CHECK(text.find("abg_iteration 4") != std::string::npos);
  CHECK(text.find("# TYPE abg_trained_edges_total counter") != std::string::npos);
  m.update(nodes, trainers(300), traffic, json::object()); // lower: a restart
  CHECK(exposition(registry).find("abg_trained_edges_total{node=\"b\",trainer=\"1\"} 500") != std::string::npos);
  m.update(nodes, trainers(900), traffic, json::object());
  CHECK(exposition(registry).find("abg_trained_edges_total{node=\"b\",trainer=\"1\"} 900") != std::string::npos);
}
