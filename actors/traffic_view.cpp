#include "actors/traffic_view.h"

#include <algorithm>
#include <array>
#include <map>
#include <optional>
#include <tuple>
#include <utility>

#include <fmt/format.h>

#include "actors/role_traffic.h"

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

// The node at the other end of a connection to `peer`: the one listening
// there, else the one whose connection's own end it is (it opened it).
std::optional<std::size_t> node_at(const std::vector<traffic_node>& nodes,
                                   const std::map<std::string, std::size_t>& listener, const std::string& peer) {
  if (auto l = listener.find(peer); l != listener.end()) return l->second;
  for (std::size_t j = 0; j < nodes.size(); ++j)
    if (nodes[j].now && std::ranges::find(nodes[j].now->local_ends, peer) != nodes[j].now->local_ends.end()) return j;
  return std::nullopt;
}

// The role of actor `id` of the process at the far end of a flow, as
// role_traffic.h counts flows; empty: another node counts the message.
std::string far_role(const msg::role_flow& f, const std::optional<msg::node_status>& far) {
  namespace rt = role_traffic;
  if (f.role == rt::caf_role) return std::string(rt::caf_role);
  if (f.remote == rt::unknown_actor) return std::string(rt::other_role);
  // No id: an anonymous sender (a node's plumbing), or a receiver named by name (CAF's own services).
  if (f.remote == 0) return std::string(f.outgoing ? rt::caf_role : rt::node_role);
  if (far)
    for (const auto& a : far->actors)
      if (a.actor == f.remote) return a.role;
  return f.outgoing ? std::string() : std::string(rt::other_role);
}

using flow_key = std::tuple<std::string, bool, std::string, std::uint64_t>;

flow_key key_of(const msg::role_flow& f) { return {f.peer, f.outgoing, f.role, f.remote}; }

// Messages and bytes of CAF's messages per (from node, from role, to node,
// to role), in total and since the iteration began.
nlohmann::json role_pair_rows(const std::vector<traffic_node>& nodes,
                              const std::map<std::string, std::size_t>& listener) {
  std::map<std::tuple<std::size_t, std::string, std::size_t, std::string>, pair_counts> pairs;
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    const auto& n = nodes[i];
    if (!n.now) continue;
    std::map<flow_key, const msg::role_flow*> before;
    if (n.iteration)
      for (const auto& f : n.iteration->flows) before[key_of(f)] = &f;
    for (const auto& f : n.now->flows) {
      const auto j = node_at(nodes, listener, f.peer);
      if (!j || *j == i) continue;
      auto far = far_role(f, nodes[*j].now);
      if (far.empty()) continue;
      auto& c = f.outgoing ? pairs[{i, f.role, *j, std::move(far)}] : pairs[{*j, std::move(far), i, f.role}];
      const auto b = before.find(key_of(f));
      c.messages += f.messages;
      c.bytes += f.bytes;
      c.iteration_messages += minus(f.messages, b != before.end() ? b->second->messages : 0);
      c.iteration_bytes += minus(f.bytes, b != before.end() ? b->second->bytes : 0);
    }
  }
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& [k, c] : pairs)
    rows.push_back({{"from", nodes[std::get<0>(k)].name},
                    {"from_role", std::get<1>(k)},
                    {"to", nodes[std::get<2>(k)].name},
                    {"to_role", std::get<3>(k)},
                    {"messages", c.messages},
                    {"bytes", c.bytes},
                    {"iteration_messages", c.iteration_messages},
                    {"iteration_bytes", c.iteration_bytes}});
  return rows;
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
  return {{"nodes", std::move(rows)}, {"pairs", std::move(pair_rows)}, {"role_pairs", role_pair_rows(nodes, listener)}};
}

} // namespace abg::actors
