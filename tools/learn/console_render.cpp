#include "tools/learn/console_render.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace abg::tools {

namespace {

using json = nlohmann::json;

std::string header(const json& v) {
  return fmt::format("{}: iteration {} of {} (epoch {}, edge path {}, chunk {}), {:.1f} s since the coordinator "
                     "started\n",
                     v.value("phase", "?"), v.value("iteration", 0) + 1, v.value("iterations", 0),
                     v.value("epoch", 0), v.value("edge_path", 0), v.value("edge_chunk", 0), v.value("seconds", 0.0));
}

std::string nodes(const json& v) {
  std::string out = fmt::format("{:<16} {:<11} {:<22} {}\n", "node", "state", "address", "roles");
  for (const auto& n : v.at("nodes")) {
    auto address = n.contains("host") ? fmt::format("{}:{}", n.value("host", ""), n.value("port", 0)) : "-";
    out += fmt::format("{:<16} {:<11} {:<22} {}\n", n.value("name", "?"), n.value("state", "?"), address,
                       fmt::join(n.value("roles", std::vector<std::string>{}), ", "));
  }
  return out;
}

std::string buckets(const json& v) {
  std::string out = fmt::format("{} of {} buckets done, {} training, {} waiting (D done, T training, . waiting; a row "
                                "per lhs partition)\n",
                                v.value("done", 0), v.value("total", 0), v.value("training", 0),
                                v.value("waiting", 0));
  if (v.value("paused", false)) out += "paused by an admin console: no bucket is handed out until it resumes the run\n";
  std::int64_t row = 0;
  for (const auto& line : v.at("grid")) out += fmt::format("{:>5} {}\n", row++, line.get<std::string>());
  return out;
}

std::string trainers(const json& v) {
  std::string out = fmt::format("{:<8} {:<16} {:<14} {:>8} {:>12} {:>12} {:>10}\n", "trainer", "node", "state",
                                "buckets", "edges", "edges/s", "loss/edge");
  for (const auto& t : v.at("trainers")) {
    auto state = t.value("state", "?");
    if (t.contains("bucket"))
      state += fmt::format(" ({}, {})", t["bucket"].value("lhs", 0), t["bucket"].value("rhs", 0));
    out += fmt::format("{:<8} {:<16} {:<14} {:>8} {:>12} {:>12.0f} {:>10.4f}\n", t.value("trainer", 0),
                       t.value("node", "?"), state, t.value("iteration_buckets", 0), t.value("iteration_edges", 0),
                       t.value("edges_per_second", 0.0), t.value("loss_per_edge", 0.0));
  }
  out += "(buckets, edges, edges/s and loss: this iteration's released buckets)\n";
  return out;
}

std::string events(const json& v) {
  std::string out;
  for (const auto& e : v.at("events")) out += fmt::format("[{:8.1f} s] {}\n", e.value("seconds", 0.0), e.value("text", ""));
  return out;
}

} // namespace

std::string render_view(const json& v) {
  const auto name = v.value("view", "");
  std::string body = name == "nodes"      ? nodes(v)
                     : name == "buckets"  ? buckets(v)
                     : name == "trainers" ? trainers(v)
                     : name == "events"   ? events(v)
                                          : v.dump(2) + "\n";
  return header(v) + body;
}

} // namespace abg::tools
