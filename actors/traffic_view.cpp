#include "actors/traffic_view.h"

#include <array>
#include <map>
#include <utility>

#include <fmt/format.h>

namespace abg::actors {

namespace {

constexpr std::array<const char*, 4> purposes{"swaps", "checkpoints", "parameters", "control"};
// Those whose messages are counted (abg frames them; CAF's control messages are not counted).
constexpr std::size_t counted_messages = 3;

std::uint64_t at(const std::vector<std::uint64_t>& v, std::size_t k) { return k < v.size() ? v[k] : 0; }

std::uint64_t minus(std::uint64_t a, std::uint64_t b) { return a > b ? a - b : 0; }

// Bytes (or messages) by the first `n` purposes, less those of `before` (the counters only grow).
nlohmann::json by_purpose(const std::vector<std::uint64_t>& now, const std::vector<std::uint64_t>* before,
                          std::size_t n = purposes.size()) {
  nlohmann::json out;
  std::uint64_t total = 0;
  for (std::size_t k = 0; k < n; ++k) {
    const auto b = minus(at(now, k), before ? at(*before, k) : 0);
    out[purposes[k]] = b;
    total += b;
  }
  out["total"] = total;
  return out;
}

struct two_ways {
  std::uint64_t sent = 0, received = 0;
};

std::map<std::string, two_ways> by_peer(const msg::node_status& s) {
  std::map<std::string, two_ways> out;
  for (std::size_t k = 0; k < s.peers.size(); ++k) {
    auto& p = out[s.peers[k]];
    p.sent += at(s.peer_sent, k);
    p.received += at(s.peer_received, k);
  }
  return out;
}

} // namespace

std::string endpoint(const std::string& host, std::uint16_t port) {
  return host.find(':') != std::string::npos ? fmt::format("[{}]:{}", host, port) : fmt::format("{}:{}", host, port);
}

nlohmann::json traffic_rows(const std::vector<traffic_node>& nodes) {
  std::map<std::string, std::size_t> listener;
  for (std::size_t i = 0; i < nodes.size(); ++i)
    for (const auto& e : nodes[i].listens) listener[e] = i;
  nlohmann::json rows = nlohmann::json::array();
  // (from, to) -> bytes in total, since the iteration began
  std::map<std::pair<std::size_t, std::size_t>, std::pair<std::uint64_t, std::uint64_t>> pairs;
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    const auto& n = nodes[i];
    if (!n.now) continue;
    const auto* before = n.iteration ? &*n.iteration : nullptr;
    rows.push_back({{"node", n.name},
                    {"sent", by_purpose(n.now->sent, nullptr)},
                    {"received", by_purpose(n.now->received, nullptr)},
                    {"iteration_sent", by_purpose(n.now->sent, before ? &before->sent : nullptr)},
                    {"iteration_received", by_purpose(n.now->received, before ? &before->received : nullptr)},
                    {"implied_swaps", n.now->implied_swaps},
                    {"sent_messages", by_purpose(n.now->messages_sent, nullptr, counted_messages)},
                    {"received_messages", by_purpose(n.now->messages_received, nullptr, counted_messages)},
                    {"iteration_sent_messages",
                     by_purpose(n.now->messages_sent, before ? &before->messages_sent : nullptr, counted_messages)},
                    {"iteration_received_messages", by_purpose(n.now->messages_received,
                                                               before ? &before->messages_received : nullptr,
                                                               counted_messages)}});
    const auto old = before ? by_peer(*before) : std::map<std::string, two_ways>{};
    for (const auto& [peer, b] : by_peer(*n.now)) {
      auto j = listener.find(peer);
      if (j == listener.end() || j->second == i) continue;
      const auto was = old.contains(peer) ? old.at(peer) : two_ways{};
      auto& out = pairs[{i, j->second}];
      out.first += b.sent;
      out.second += minus(b.sent, was.sent);
      auto& in = pairs[{j->second, i}];
      in.first += b.received;
      in.second += minus(b.received, was.received);
    }
  }
  nlohmann::json pair_rows = nlohmann::json::array();
  for (const auto& [ends, bytes] : pairs)
    pair_rows.push_back({{"from", nodes[ends.first].name},
                         {"to", nodes[ends.second].name},
                         {"bytes", bytes.first},
                         {"iteration_bytes", bytes.second}});
  return {{"nodes", std::move(rows)}, {"pairs", std::move(pair_rows)}};
}

} // namespace abg::actors
