#include "actors/traffic_view.h"

#include <array>
#include <map>
#include <utility>

#include <fmt/format.h>

namespace abg::actors {

namespace {

constexpr std::array<const char*, 4> purposes{"swaps", "checkpoints", "parameters", "control"};

std::uint64_t at(const std::vector<std::uint64_t>& v, std::size_t k) { return k < v.size() ? v[k] : 0; }

std::uint64_t minus(std::uint64_t a, std::uint64_t b) { return a > b ? a - b : 0; }

// Bytes (or messages) by purpose, less those of `before` (the counters only grow).
nlohmann::json by_purpose(const std::vector<std::uint64_t>& now, const std::vector<std::uint64_t>* before) {
  nlohmann::json out;
  std::uint64_t total = 0;
  for (std::size_t k = 0; k < purposes.size(); ++k) {
    const auto b = minus(at(now, k), before ? at(*before, k) : 0);
    out[purposes[k]] = b;
    total += b;
  }
  out["total"] = total;
  return out;
}

struct two_ways {
  std::uint64_t sent = 0, received = 0;
  std::uint64_t messages_sent = 0, messages_received = 0;
};

// What a pair carried: bytes and messages, in total and since the iteration began.
struct pair_counts {
  std::uint64_t bytes = 0, iteration_bytes = 0, messages = 0, iteration_messages = 0;
};

std::map<std::string, two_ways> by_peer(const msg::node_status& s) {
  std::map<std::string, two_ways> out;
  for (std::size_t k = 0; k < s.peers.size(); ++k) {
    auto& p = out[s.peers[k]];
    p.sent += at(s.peer_sent, k);
    p.received += at(s.peer_received, k);
    p.messages_sent += at(s.peer_messages_sent, k);
    p.messages_received += at(s.peer_messages_received, k);
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
  std::map<std::pair<std::size_t, std::size_t>, pair_counts> pairs; // (from, to)
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
                    {"sent_messages", by_purpose(n.now->messages_sent, nullptr)},
                    {"received_messages", by_purpose(n.now->messages_received, nullptr)},
                    {"iteration_sent_messages",
                     by_purpose(n.now->messages_sent, before ? &before->messages_sent : nullptr)},
                    {"iteration_received_messages",
                     by_purpose(n.now->messages_received, before ? &before->messages_received : nullptr)}});
    const auto old = before ? by_peer(*before) : std::map<std::string, two_ways>{};
    for (const auto& [peer, b] : by_peer(*n.now)) {
      auto j = listener.find(peer);
      if (j == listener.end() || j->second == i) continue;
      const auto was = old.contains(peer) ? old.at(peer) : two_ways{};
      auto& out = pairs[{i, j->second}];
      out.bytes += b.sent;
      out.iteration_bytes += minus(b.sent, was.sent);
      out.messages += b.messages_sent;
      out.iteration_messages += minus(b.messages_sent, was.messages_sent);
      auto& in = pairs[{j->second, i}];
      in.bytes += b.received;
      in.iteration_bytes += minus(b.received, was.received);
      in.messages += b.messages_received;
      in.iteration_messages += minus(b.messages_received, was.messages_received);
    }
  }
  nlohmann::json pair_rows = nlohmann::json::array();
  for (const auto& [ends, c] : pairs)
    pair_rows.push_back({{"from", nodes[ends.first].name},
                         {"to", nodes[ends.second].name},
                         {"bytes", c.bytes},
                         {"iteration_bytes", c.iteration_bytes},
                         {"messages", c.messages},
                         {"iteration_messages", c.iteration_messages}});
  return {{"nodes", std::move(rows)}, {"pairs", std::move(pair_rows)}};
}

} // namespace abg::actors
