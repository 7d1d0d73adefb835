// A node's roles: spawned into an actor system from its entry in the
// cluster spec, and described as the `member` it joins the cluster with.
// The same for a node of a multi-process cluster and for every node of a
// simulation in one process.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <caf/all.hpp>

#include "abg/cluster.h"
#include "abg/node/run.h"
#include "actors/deadlines.h"
#include "messages/interfaces.h"
#include "runtime/train/plan.h"

namespace abg::actors {

struct node_context {
  const train::plan* plan = nullptr; // this node's plan of the run (its own config and data)
  std::string config_toml;           // the effective config
  cluster_spec cluster;
  std::size_t index = 0;             // this node in cluster.nodes
  std::uint64_t seed = 0;            // the coordinator's choice (other nodes get it from their setup)
  std::uint64_t held_out_seed = 0;
  node::train_callbacks callbacks;
  deadlines limits;
  bool over_the_wire = false; // relays in front of this node's servers
  bool check_only = false;    // the pre-flight check: join, check, train nothing
  std::optional<cluster_token> admin_token; // the coordinator's node: what admin consoles prove
};

struct node_roles {
  msg::member member; // what the node joins with (name, roles; host, port and node are the caller's)
  msg::coordinator_actor coordinator; // invalid unless this node hosts it
  msg::inspector_actor inspector;     // with the coordinator: what `abg console` reaches
  std::vector<caf::actor> clients;    // coordinator, inspector, trainer
  std::vector<caf::actor> servers;    // lock, partition and parameter servers (and their relays)
  bool partitions_on_disk = false;    // its partition server stores on disk (a partition buffer)
};

/// The dataset id, config digest and abg version a node joins with.
msg::member describe(const node_context& ctx);

node_roles spawn_roles(caf::actor_system& sys, const node_context& ctx);

/// Stops the roles of these nodes and waits until they are gone: first the
/// consoles told that the run stops detach (5 s at most), then
/// every coordinator and trainer (a trainer joins its kernel, which may be
/// waiting on a server), then the servers. Roles still running
/// `slow_after` after they were told to stop are named through `log` (once
/// per group), and waited for.
void stop_roles(caf::actor_system& sys, const std::vector<node_roles>& nodes,
                const std::function<void(const std::string&)>& log = {},
                std::chrono::seconds slow_after = std::chrono::seconds(10));

} // namespace abg::actors
