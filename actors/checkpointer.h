// The coordinator's commits (ARCHITECTURE.md, "Nodes"): a version of the
// checkpoint gathered through messages, with the trainers idle between
// iterations: every partition changed since the last commit from its
// partition server (the trainers wrote them back before the epoch ended; a
// partition still at the version the last commit holds keeps its file), the
// shared parameters, their optimizer state and the unpartitioned tables from
// the live trainers (the first that has each), one table at a time. With
// checkpoint_mode = "local" the partition servers write the changed tables
// into their own nodes' checkpoint paths instead (actors/local_tables.h) and
// the manifest names those nodes. Blocking: for the coordinator's job thread.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <caf/all.hpp>
#include <nlohmann/json.hpp>

#include "abg/error.h"
#include "abg/storage/checkpoint.h"
#include "actors/local_tables.h"
#include "actors/partition_client.h"
#include "messages/interfaces.h"
#include "runtime/train/plan.h"

namespace abg::actors {

struct checkpoint_sources {
  std::vector<partition_server_ref> partition_servers; // partition k on server k mod count
  std::vector<server_node> server_nodes;               // their nodes, same order
  std::vector<msg::trainer_actor> trainers;            // live ones, lowest id first
};

struct commit_request {
  std::int64_t version = 0;
  storage::checkpoint_position position;
  nlohmann::json stats = nlohmann::json::object(); // also appended to training_stats.json, unless mid-iteration
};

/// What the last commit of this run (or the checkpoint it resumed) holds,
/// and the partition servers' version of each of its tables then.
struct committed_tables {
  std::optional<storage::checkpoint_manifest> manifest;
  std::map<msg::partition_key, std::uint64_t> versions;
};

struct commit_outcome {
  storage::shared_tensors shared; // checkpoint names, values and optimizer state
  committed_tables committed;     // for the next commit
  std::int64_t tables_written = 0, tables_kept = 0;
  std::int64_t tables_linked = 0; // of those written: the partition store's own files
  std::vector<std::string> log; // what went wrong without failing the commit (pruning other nodes)
};

/// Writes and commits the version; returns the shared parameters committed,
/// to set up trainers that join later, and what the next commit may keep.
expected<commit_outcome> commit_checkpoint(caf::actor_system& sys, const train::plan& p, const std::string& config_toml,
                                           const commit_request& request, const checkpoint_sources& sources,
                                           const committed_tables& last, caf::timespan deadline);

} // namespace abg::actors
