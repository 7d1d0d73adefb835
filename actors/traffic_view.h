// The console's `traffic` view (docs/console.md) from what each node
// reported of itself (msg::node_status): bytes by purpose per node, and per
// node pair, in total and since the current iteration began. A pair's
// bytes come from the connections one node opened to an address another
// node listens on (its CAF port or its bulk channel), so each connection
// counts once; connections that others opened to it are the others' to
// report, and a console's connection belongs to no pair.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "messages/payloads.h"

namespace abg::actors {

struct traffic_node {
  std::string name;
  std::vector<std::string> listens;           // "host:port" of its CAF port and bulk channel
  std::optional<msg::node_status> now;        // its last report
  std::optional<msg::node_status> iteration;  // its last report before the current iteration began
};

/// {"nodes": [{node, sent, received, iteration_sent, iteration_received,
/// implied_swaps, sent_messages, received_messages, iteration_sent_messages,
/// iteration_received_messages}], "pairs": [{from, to, bytes,
/// iteration_bytes, messages, iteration_messages}], "role_pairs": [{from,
/// from_role, to, to_role, messages, bytes, iteration_messages,
/// iteration_bytes}]}; bytes and messages by purpose (swaps, checkpoints,
/// parameters, control, total); role pairs: CAF's messages (parameters and
/// control) by the roles of the two actors, each counted once by one of
/// the two nodes (actors/role_traffic.h), found by its listening address or
/// by the connections' own ends it reports.
nlohmann::json traffic_rows(const std::vector<traffic_node>& nodes);

/// "host:port", with brackets around an IPv6 host, as the kernel's peer addresses read.
std::string endpoint(const std::string& host, std::uint16_t port);

} // namespace abg::actors
