// The coordinator's commits (ARCHITECTURE.md, "Nodes"): a version of the
// checkpoint gathered through messages, with the trainers idle between
// iterations: every partition from its partition server (the trainers wrote
// them back before the epoch ended), the shared parameters, their optimizer
// state and the unpartitioned tables from the live trainers (the first that
// has each), one table at a time. Blocking: for the coordinator's job thread.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <caf/all.hpp>
#include <nlohmann/json.hpp>

#include "abg/error.h"
#include "abg/storage/checkpoint.h"
#include "actors/partition_client.h"
#include "messages/interfaces.h"
#include "runtime/train/plan.h"

namespace abg::actors {

struct checkpoint_sources {
  std::vector<partition_server_ref> partition_servers; // partition k on server k mod count
  std::vector<msg::trainer_actor> trainers;                   // live ones, lowest id first
};

struct commit_request {
  std::int64_t version = 0;
  storage::checkpoint_position position;
  nlohmann::json stats = nlohmann::json::object(); // also appended to training_stats.json
};

/// Writes and commits the version; returns the shared parameters committed
/// (checkpoint names, values and optimizer state), to set up trainers that
/// join later.
expected<storage::shared_tensors> commit_checkpoint(caf::actor_system& sys, const train::plan& p,
                                                    const std::string& config_toml, const commit_request& request,
                                                    const checkpoint_sources& sources, caf::timespan deadline);

} // namespace abg::actors
