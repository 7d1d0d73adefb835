// The coordinator's side of starting (and restarting) a run: every partition
// server and parameter-server shard emptied and given the start point's
// tables and shared parameters, one table at a time (no whole model in this
// process). A table that checkpoint_mode = "local" left on other nodes only
// is read back by a partition server on one of them. Blocking: for the
// coordinator's job thread.
#pragma once

#include <cstdint>
#include <vector>

#include <caf/all.hpp>

#include "abg/error.h"
#include "actors/local_tables.h"
#include "actors/partition_client.h"
#include "messages/interfaces.h"
#include "runtime/train/plan.h"
#include "runtime/train/start_point.h"

namespace abg::actors {

struct seed_targets {
  std::vector<partition_server_ref> partition_servers; // partition k on server k mod count
  std::vector<server_node> server_nodes;               // their nodes, same order
  std::vector<msg::parameter_server_actor> parameter_servers; // empty: one trainer, nothing shared
};

struct seeded_tables {
  std::uint64_t bytes = 0;  // of the partitions seeded
  std::int32_t linked = 0;  // tables a server linked from the checkpoint into its partition store
};

/// Seeds the servers: every table at `version`, the shared parameters (and,
/// with parameter servers, the unpartitioned tables' embeddings) as values.
expected<seeded_tables> seed_servers(caf::actor_system& sys, const train::plan& p, const train::start_point& start,
                                     std::uint64_t seed, std::uint64_t version, const seed_targets& targets,
                                     caf::timespan deadline);

} // namespace abg::actors
