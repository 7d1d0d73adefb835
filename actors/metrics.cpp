#include "actors/metrics.h"

#include <array>

namespace abg::actors {

using json = nlohmann::json;

namespace {

template <class T>
prometheus::Family<T>& family(prometheus::Registry& r, const char* name, const char* help) {
  if constexpr (std::is_same_v<T, prometheus::Counter>)
    return prometheus::BuildCounter().Name(name).Help(help).Register(r);
  else
    return prometheus::BuildGauge().Name(name).Help(help).Register(r);
}

double number(const json& doc, const char* field) {
  auto it = doc.find(field);
  return it != doc.end() && it->is_number() ? it->get<double>() : 0.0;
}

} // namespace

run_metrics::run_metrics(prometheus::Registry& r)
    : iteration_(family<prometheus::Gauge>(r, "abg_iteration", "The iteration being trained (0-based)")),
      iterations_(family<prometheus::Gauge>(r, "abg_iterations", "Iterations of the run (epochs x edge paths x chunks)")),
      epoch_(family<prometheus::Gauge>(r, "abg_epoch", "The epoch being trained (0-based)")),
      trained_edges_(family<prometheus::Counter>(r, "abg_trained_edges_total", "Edges trained, per trainer")),
      trained_buckets_(family<prometheus::Counter>(r, "abg_trained_buckets_total", "Buckets trained, per trainer")),
      loss_(family<prometheus::Gauge>(r, "abg_trainer_loss_per_edge",
                                      "Loss per edge of the trainer's buckets released this iteration")),
      training_(family<prometheus::Gauge>(r, "abg_trainer_training", "1 while the trainer trains a bucket, else 0")),
      kernel_seconds_(family<prometheus::Counter>(r, "abg_trainer_kernel_seconds_total",
                                                  "Seconds the trainer's kernel trained buckets")),
      fetch_seconds_(family<prometheus::Counter>(r, "abg_trainer_fetch_seconds_total",
                                                 "Seconds the trainer wrote back and fetched partitions before its buckets")),
      lock_wait_seconds_(family<prometheus::Counter>(r, "abg_trainer_lock_wait_seconds_total",
                                                     "Seconds the trainer waited for the lock server to hand it a bucket")),
      partitions_loaded_(family<prometheus::Counter>(r, "abg_trainer_partitions_loaded_total",
                                                     "Partitions the trainer loaded for its buckets (swaps)")),
      held_out_mrr_(family<prometheus::Gauge>(r, "abg_trainer_held_out_mrr",
                                              "MRR of the held-out edges of the trainer's buckets released this "
                                              "iteration, after training them (eval_fraction > 0)")),
      up_(family<prometheus::Gauge>(r, "abg_node_up", "1 while the node is alive, 0 when lost or not joined")),
      heard_(family<prometheus::Gauge>(r, "abg_node_heard_seconds_ago", "Seconds since the node last answered")),
      rss_(family<prometheus::Gauge>(r, "abg_node_rss_bytes", "The node's resident memory")),
      partition_bytes_(family<prometheus::Gauge>(r, "abg_node_partition_bytes",
                                                 "Bytes of partitions the node stores and holds for training")),
      parameter_bytes_(family<prometheus::Gauge>(r, "abg_node_parameter_bytes",
                                                 "Bytes of parameters the node's shard and trainer hold")),
      sent_(family<prometheus::Counter>(r, "abg_node_sent_bytes_total", "Bytes the node sent to other processes, by purpose")),
      received_(family<prometheus::Counter>(r, "abg_node_received_bytes_total",
                                            "Bytes the node received from other processes, by purpose")),
      sent_messages_(family<prometheus::Counter>(r, "abg_node_sent_messages_total",
                                                 "Messages the node sent to other processes, by purpose")),
      received_messages_(family<prometheus::Counter>(r, "abg_node_received_messages_total",
                                                     "Messages the node received from other processes, by purpose")),
      pair_bytes_(family<prometheus::Counter>(r, "abg_pair_bytes_total", "Bytes from one node to another")),
      pair_messages_(family<prometheus::Counter>(r, "abg_pair_messages_total", "Messages from one node to another")),
      role_pair_messages_(family<prometheus::Counter>(r, "abg_role_pair_messages_total",
                                                      "CAF messages from a role of one node to a role of another")),
      role_pair_bytes_(family<prometheus::Counter>(r, "abg_role_pair_bytes_total",
                                                   "Bytes of CAF messages from a role of one node to a role of another")),
      pushes_(family<prometheus::Counter>(r, "abg_shard_pushes_total", "Pushes to the node's parameter-server shard")),
      pulls_(family<prometheus::Counter>(r, "abg_shard_pulls_total", "Pulls from the node's parameter-server shard")),
      shard_bytes_(family<prometheus::Gauge>(r, "abg_shard_bytes", "Bytes of parameters the node's shard holds")) {}

void run_metrics::set_total(prometheus::Counter& c, double total) {
  if (total > c.Value()) c.Increment(total - c.Value());
}

void run_metrics::update(const json& nodes, const json& trainers, const json& traffic, const json& params) {
  iteration_.Add({}).Set(number(nodes, "iteration"));
  iterations_.Add({}).Set(number(nodes, "iterations"));
  epoch_.Add({}).Set(number(nodes, "epoch"));
  for (const auto& n : nodes.value("nodes", json::array())) {
    const prometheus::Labels l{{"node", n.value("name", "")}};
    up_.Add(l).Set(n.value("state", "") == "alive" ? 1 : 0);
    if (n.contains("heard_seconds_ago")) heard_.Add(l).Set(number(n, "heard_seconds_ago"));
    if (n.contains("rss_bytes")) rss_.Add(l).Set(number(n, "rss_bytes"));
    if (n.contains("partition_bytes")) partition_bytes_.Add(l).Set(number(n, "partition_bytes"));
    if (n.contains("parameter_bytes")) parameter_bytes_.Add(l).Set(number(n, "parameter_bytes"));
  }
  for (const auto& t : trainers.value("trainers", json::array())) {
    const prometheus::Labels l{{"trainer", std::to_string(t.value("trainer", 0))}, {"node", t.value("node", "")}};
    set_total(trained_edges_.Add(l), number(t, "edges_trained"));
    set_total(trained_buckets_.Add(l), number(t, "buckets_trained"));
    loss_.Add(l).Set(number(t, "loss_per_edge"));
    training_.Add(l).Set(t.value("state", "") == "training" ? 1 : 0);
    set_total(kernel_seconds_.Add(l), number(t, "run_kernel_seconds"));
    set_total(fetch_seconds_.Add(l), number(t, "run_fetch_seconds"));
    set_total(lock_wait_seconds_.Add(l), number(t, "run_lock_wait_seconds"));
    set_total(partitions_loaded_.Add(l), number(t, "run_partitions_loaded"));
    if (t.contains("mrr_after")) held_out_mrr_.Add(l).Set(number(t, "mrr_after"));
  }
  static constexpr std::array purposes{"swaps", "checkpoints", "parameters", "control"};
  for (const auto& n : traffic.value("nodes", json::array()))
    for (const char* purpose : purposes) {
      const prometheus::Labels l{{"node", n.value("node", "")}, {"purpose", purpose}};
      set_total(sent_.Add(l), number(n.value("sent", json::object()), purpose));
      set_total(received_.Add(l), number(n.value("received", json::object()), purpose));
      set_total(sent_messages_.Add(l), number(n.value("sent_messages", json::object()), purpose));
      set_total(received_messages_.Add(l), number(n.value("received_messages", json::object()), purpose));
    }
  for (const auto& p : traffic.value("pairs", json::array())) {
    const prometheus::Labels l{{"from", p.value("from", "")}, {"to", p.value("to", "")}};
    set_total(pair_bytes_.Add(l), number(p, "bytes"));
    set_total(pair_messages_.Add(l), number(p, "messages"));
  }
  for (const auto& r : traffic.value("role_pairs", json::array())) {
    const prometheus::Labels l{{"from", r.value("from", "")},
                               {"from_role", r.value("from_role", "")},
                               {"to", r.value("to", "")},
                               {"to_role", r.value("to_role", "")}};
    set_total(role_pair_messages_.Add(l), number(r, "messages"));
    set_total(role_pair_bytes_.Add(l), number(r, "bytes"));
  }
  for (const auto& s : params.value("shards", json::array())) {
    const prometheus::Labels l{{"node", s.value("node", "")}};
    set_total(pushes_.Add(l), number(s, "pushes"));
    set_total(pulls_.Add(l), number(s, "pulls"));
    shard_bytes_.Add(l).Set(number(s, "bytes"));
  }
}

} // namespace abg::actors
