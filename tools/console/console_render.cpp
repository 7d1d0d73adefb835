#include "tools/console/console_render.h"

#include <algorithm>

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

// Megabytes of a field, "-" when the document has none.
std::string mb_or_dash(const json& row, const char* field, const char* format = "{:.0f}") {
  if (!row.contains(field)) return "-";
  return fmt::format(fmt::runtime(format), static_cast<double>(row.at(field).get<std::uint64_t>()) / 1e6);
}

std::string nodes(const json& v) {
  std::string out = fmt::format("{:<16} {:<11} {:<22} {:>7} {:>9} {:>9} {:>9} {}\n", "node", "state", "address",
                                "heard", "RSS MB", "parts MB", "params MB", "roles");
  for (const auto& n : v.at("nodes")) {
    auto address = n.contains("host") ? fmt::format("{}:{}", n.value("host", ""), n.value("port", 0)) : "-";
    auto heard = n.contains("heard_seconds_ago") ? fmt::format("{:.1f}s", n.value("heard_seconds_ago", 0.0)) : "-";
    out += fmt::format("{:<16} {:<11} {:<22} {:>7} {:>9} {:>9} {:>9} {}\n", n.value("name", "?"), n.value("state", "?"),
                       address, heard, mb_or_dash(n, "rss_bytes"), mb_or_dash(n, "partition_bytes", "{:.3f}"),
                       mb_or_dash(n, "parameter_bytes", "{:.3f}"),
                       fmt::join(n.value("roles", std::vector<std::string>{}), ", "));
  }
  return out;
}

std::string partitions(const json& v) {
  std::string out = fmt::format("{:<16} {:>5} {:>10} {:>5} {:>9}  {:<28} {}\n", "entity", "part", "rows", "dim", "MB",
                                "stored on (version)", "held by (version)");
  for (const auto& p : v.at("partitions")) {
    std::vector<std::string> stored, held;
    for (const auto& s : p.at("stored_on"))
      stored.push_back(fmt::format("{} ({})", s.value("node", "?"), s.value("version", std::uint64_t{0})));
    for (const auto& h : p.at("held_by"))
      held.push_back(fmt::format("trainer {} on {} ({})", h.value("trainer", 0), h.value("node", "?"),
                                   h.value("version", std::uint64_t{0})));
    out += fmt::format("{:<16} {:>5} {:>10} {:>5} {:>9.2f}  {:<28} {}\n", p.value("entity", "?"), p.value("part", 0),
                       p.value("rows", 0), p.value("dim", 0), static_cast<double>(p.value("bytes", 0ULL)) / 1e6,
                       stored.empty() ? "-" : fmt::format("{}", fmt::join(stored, ", ")),
                       held.empty() ? "-" : fmt::format("{}", fmt::join(held, ", ")));
  }
  return out;
}

std::string params(const json& v) {
  std::string out = fmt::format("{:<16} {:>6} {:>10} {:>9} {:>9} {:>8} {:>8} {:>11} {:>11}\n", "shard on", "names",
                                "MB", "pushes", "pulls", "push/s", "pull/s", "MB in", "MB out");
  for (const auto& p : v.at("shards"))
    out += fmt::format("{:<16} {:>6} {:>10.3f} {:>9} {:>9} {:>8.1f} {:>8.1f} {:>11.3f} {:>11.3f}\n", p.value("node", "?"),
                       p.value("names", 0), static_cast<double>(p.value("bytes", 0ULL)) / 1e6, p.value("pushes", 0),
                       p.value("pulls", 0), p.value("pushes_per_second", 0.0), p.value("pulls_per_second", 0.0),
                       static_cast<double>(p.value("pushed_bytes", 0ULL)) / 1e6,
                       static_cast<double>(p.value("pulled_bytes", 0ULL)) / 1e6);
  if (v.at("shards").empty()) out += "(no parameter server: one trainer shares nothing)\n";
  return out;
}

std::string log_lines(const json& v) {
  std::string out;
  for (const auto& l : v.at("lines")) out += l.value("line", "") + "\n";
  out += fmt::format("(the last {} lines of {})\n", v.at("lines").size(),
                     v.value("file", "").empty() ? std::string("the run's log") : v.value("file", ""));
  return out;
}

// A grid row: one letter per bucket, each on its state's colour (green
// done, yellow training, red re-queued) when the terminal has colours.
std::string grid_row(const std::string& letters, bool colour) {
  if (!colour) return letters;
  std::string out;
  for (char c : letters) {
    const char* paint = c == 'D' ? "\033[30;42m" : c == 'T' ? "\033[30;43m" : c == 'R' ? "\033[30;41m" : "\033[2m";
    out += fmt::format("{}{}\033[0m", paint, c);
  }
  return out;
}

std::string buckets(const json& v, bool colour) {
  std::string out = fmt::format("{} of {} buckets done, {} training, {} re-queued, {} waiting (D done, T training, R "
                                "re-queued: its trainer was lost, . waiting; a row per lhs partition)\n",
                                v.value("done", 0), v.value("total", 0), v.value("training", 0),
                                v.value("requeued", 0), v.value("waiting", 0));
  if (v.value("paused", false)) out += "paused by an admin console: no bucket is handed out until it resumes the run\n";
  std::int64_t row = 0;
  for (const auto& line : v.at("grid")) out += fmt::format("{:>5} {}\n", row++, grid_row(line.get<std::string>(), colour));
  for (const auto& b : v.at("buckets"))
    if (b.value("state", "") == "training")
      out += fmt::format("bucket ({}, {}): trainer {} since {:.1f} s (for {:.1f} s){}\n", b.value("lhs", 0),
                         b.value("rhs", 0), b.value("trainer", 0), b.value("since_seconds", 0.0),
                         b.value("for_seconds", 0.0), b.value("requeued", false) ? ", re-queued" : "");
  out += fmt::format("swaps (partitions loaded): {} this iteration", v.value("swaps", 0));
  if (const auto& all = v.at("swaps_per_iteration"); !all.empty()) {
    // The last ten committed iterations: enough to see a trend on a line.
    std::string last;
    for (std::size_t i = all.size() > 10 ? all.size() - 10 : 0; i < all.size(); ++i)
      last += fmt::format(" {}", all[i].value("swaps", 0));
    out += fmt::format("; the last {} iteration(s):{}", std::min<std::size_t>(all.size(), 10), last);
  }
  out += "\n";
  return out;
}

std::string trainers(const json& v) {
  std::string out = fmt::format("{:<8} {:<16} {:<24} {:>8} {:>10} {:>10} {:>10} {:>8} {:>8} {:>8} {:>7}\n", "trainer",
                                "node", "state", "buckets", "edges", "edges/s", "loss/edge", "locks s", "fetch s",
                                "train s", "mrr");
  bool held_out = false;
  for (const auto& t : v.at("trainers")) {
    auto state = t.value("state", "?");
    if (t.contains("bucket"))
      state += fmt::format(" ({}, {}) {:.1f} s", t["bucket"].value("lhs", 0), t["bucket"].value("rhs", 0),
                           t.value("bucket_seconds", 0.0));
    held_out |= t.contains("mrr_after");
    out += fmt::format("{:<8} {:<16} {:<24} {:>8} {:>10} {:>10.0f} {:>10.4f} {:>8.2f} {:>8.2f} {:>8.2f} {:>7}\n",
                       t.value("trainer", 0), t.value("node", "?"), state, t.value("iteration_buckets", 0),
                       t.value("iteration_edges", 0), t.value("edges_per_second", 0.0), t.value("loss_per_edge", 0.0),
                       t.value("lock_wait_seconds", 0.0), t.value("fetch_seconds", 0.0),
                       t.value("kernel_seconds", 0.0),
                       t.contains("mrr_after") ? fmt::format("{:.4f}", t.value("mrr_after", 0.0)) : std::string("-"));
  }
  out += "(this iteration's released buckets: seconds waiting for the lock server, fetching partitions and in the "
         "kernel; mrr: their held-out edges after training, with eval_fraction > 0)\n";
  // Per bucket: loss and held-out MRR, the newest iteration's.
  if (held_out) {
    out += fmt::format("{:<8} {:<10} {:>10} {:>10} {:>11} {:>11}\n", "trainer", "bucket", "edges", "loss/edge",
                       "mrr before", "mrr after");
    for (const auto& t : v.at("trainers"))
      for (const auto& b : t.value("released", json::array()))
        if (b.contains("mrr_after"))
          out += fmt::format("{:<8} {:<10} {:>10} {:>10.4f} {:>11.4f} {:>11.4f}\n", t.value("trainer", 0),
                             fmt::format("({}, {})", b.value("lhs", 0), b.value("rhs", 0)), b.value("edges", 0),
                             b.value("loss_per_edge", 0.0), b.value("mrr_before", 0.0), b.value("mrr_after", 0.0));
  }
  return out;
}

double mb(const json& bytes) { return static_cast<double>(bytes.get<std::uint64_t>()) / 1e6; }

std::string traffic(const json& v) {
  std::string out = fmt::format("{:<16} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10}\n", "node (MB)", "sent",
                                "swaps", "ckpts", "params", "control", "received", "iter sent", "iter recv");
  for (const auto& n : v.at("nodes")) {
    const auto& s = n.at("sent");
    out += fmt::format("{:<16} {:>10.3f} {:>10.3f} {:>10.3f} {:>10.3f} {:>10.3f} {:>10.3f} {:>10.3f} {:>10.3f}\n",
                       n.value("node", "?"), mb(s.at("total")), mb(s.at("swaps")), mb(s.at("checkpoints")),
                       mb(s.at("parameters")), mb(s.at("control")), mb(n.at("received").at("total")),
                       mb(n.at("iteration_sent").at("total")), mb(n.at("iteration_received").at("total")));
  }
  if (v.at("nodes").empty()) out += "(no node reports traffic: a single process has no traffic between nodes)\n";
  if (!v.at("nodes").empty())
    out += fmt::format("{:<16} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10}\n", "node (messages)", "sent",
                       "swaps", "ckpts", "params", "control", "received", "iter sent");
  auto count = [](const json& by, const char* k) { return by.value(k, std::uint64_t{0}); };
  for (const auto& n : v.at("nodes")) {
    const auto m = n.value("sent_messages", json::object());
    out += fmt::format("{:<16} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10}\n", n.value("node", "?"),
                       count(m, "total"), count(m, "swaps"), count(m, "checkpoints"), count(m, "parameters"),
                       count(m, "control"), count(n.value("received_messages", json::object()), "total"),
                       count(n.value("iteration_sent_messages", json::object()), "total"));
  }
  out += fmt::format("{:<16} {:<16} {:>12} {:>16} {:>10} {:>14}\n", "from", "to", "MB", "MB iteration", "messages",
                     "msgs iteration");
  for (const auto& p : v.at("pairs"))
    out += fmt::format("{:<16} {:<16} {:>12.3f} {:>16.3f} {:>10} {:>14}\n", p.value("from", "?"), p.value("to", "?"),
                       mb(p.at("bytes")), mb(p.at("iteration_bytes")), count(p, "messages"),
                       count(p, "iteration_messages"));
  // CAF's messages (parameters and control) by the roles they pass between.
  const auto roles = v.value("role_pairs", json::array());
  if (!roles.empty())
    out += fmt::format("{:<28} {:<28} {:>10} {:>12} {:>14}\n", "from (CAF messages)", "to", "messages", "MB",
                       "msgs iteration");
  for (const auto& r : roles)
    out += fmt::format("{:<28} {:<28} {:>10} {:>12.3f} {:>14}\n",
                       fmt::format("{} {}", r.value("from", "?"), r.value("from_role", "?")),
                       fmt::format("{} {}", r.value("to", "?"), r.value("to_role", "?")), count(r, "messages"),
                       mb(r.at("bytes")), count(r, "iteration_messages"));
  return out;
}

std::string events(const json& v) {
  std::string out;
  for (const auto& e : v.at("events")) out += fmt::format("[{:8.1f} s] {}\n", e.value("seconds", 0.0), e.value("text", ""));
  return out;
}

} // namespace

std::string render_view(const json& v, bool colour) {
  const auto name = v.value("view", "");
  std::string body = name == "nodes"      ? nodes(v)
                     : name == "buckets"  ? buckets(v, colour)
                     : name == "trainers" ? trainers(v)
                     : name == "events"   ? events(v)
                     : name == "traffic"  ? traffic(v)
                     : name == "partitions" ? partitions(v)
                     : name == "params"   ? params(v)
                     : name == "log"      ? log_lines(v)
                                          : v.dump(2) + "\n";
  return header(v) + body;
}

} // namespace abg::tools
