// checkpoint_mode = "local" (docs/cluster.md, "Checkpoints"): partition
// servers write the tables they hold into their own nodes' checkpoint paths
// (and, with checkpoint_replicas = 1, a copy of the previous server's), read
// them back when a run resumes and prune the files no committed version
// lists; the coordinator's manifest names the nodes that hold each file.
// Blocking: the server's half for a partition server's job thread, the
// coordinator's half for the coordinator's.
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <set>
#include <span>
#include <string>
#include <vector>

#include <caf/all.hpp>

#include "abg/error.h"
#include "abg/model/model.h"
#include "abg/storage/checkpoint.h"
#include "abg/storage/partition_store.h"
#include "actors/deadlines.h"
#include "actors/partition_client.h"
#include "messages/interfaces.h"

namespace abg::actors {

/// Where a partition server keeps its tables: its node's checkpoint path
/// (empty: it keeps none, and refuses to save or restore).
struct table_store {
  std::filesystem::path checkpoint_path;
  storage::dataset_id dataset;
  deadlines limits;
  /// Where it keeps the partitions it serves (storage::partition_store);
  /// empty: in memory.
  std::filesystem::path disk_path;
};

// --- a partition server's half -------------------------------------------

/// Writes a table (embeddings [rows, dim], state [rows]) as the two files
/// that checkpoint version `commit` names for it, synced.
expected<std::vector<msg::table_file>> write_table(const table_store& store, const msg::partition_key& key,
                                                   std::int64_t commit, std::span<const std::int64_t> shape,
                                                   std::span<const float> embeddings, std::span<const float> state);

/// The same files as hard links of a partition store's files of the table
/// at `version` (storage::partition_store::link_into); nullopt when the
/// store's filesystem cannot link into the checkpoint path.
expected<std::optional<std::vector<msg::table_file>>> link_table(const table_store& store,
                                                                 const msg::partition_key& key, std::int64_t commit,
                                                                 std::uint64_t version,
                                                                 const storage::partition_store& disk);

/// Makes the table of `files` (embeddings, optimizer: a checkpoint's, in
/// this node's checkpoint path) a partition store's version `version` by
/// linking them (storage::partition_store::adopt): true; where the
/// filesystem cannot link them there, by storing a checked copy: false.
expected<bool> adopt_table(const table_store& store, const msg::partition_key& key, std::uint64_t version,
                           const std::vector<msg::table_file>& files, storage::partition_store& disk);

/// Reads back the table of `files` (embeddings, optimizer), checking names,
/// shapes and the checksums the manifest recorded.
expected<model::table> read_table(const table_store& store, const std::vector<msg::table_file>& files);

// --- the coordinator's half ----------------------------------------------

/// A partition server's node: its name (what the manifest lists) and its
/// bulk channel as the other nodes reach it (empty in one process).
struct server_node {
  std::string name;
  std::string bulk;
};

struct table_to_save {
  msg::partition_key key;
  std::uint64_t version = 0; // the partition server's
};

/// The partition servers of a run, in placement order (partition k on server k mod count).
struct local_servers {
  std::vector<partition_server_ref> refs; // as the coordinator reaches them
  std::vector<server_node> nodes;
};

/// Each table written by the server that holds it and, with `replicas`, by
/// the next server too (all servers at once); the embeddings and optimizer
/// entries of each, in `tables` order, with the nodes that hold them;
/// `linked`, if given, says of each whether its holder linked its partition
/// store's files rather than writing a copy.
expected<std::vector<std::array<storage::checkpoint_file, 2>>> save_local_tables(
  caf::actor_system& sys, const local_servers& servers, const std::vector<table_to_save>& tables,
  std::int64_t commit, bool replicas, caf::timespan deadline, std::vector<bool>* linked = nullptr);

/// A partition server in this process restores the table of `files`, in
/// its (this process's) checkpoint path, into itself as `version`: linked
/// into its store when it keeps partitions on disk.
expected<void> restore_own_table(caf::actor_system& sys, const msg::partition_server_actor& server,
                                 const msg::partition_key& key, std::uint64_t version,
                                 const std::array<const storage::checkpoint_file*, 2>& files, caf::timespan deadline);

/// Stores the table of `files` (as a manifest lists them) into server
/// `target` as `version`, read by the first node of their list that has it.
expected<void> restore_local_table(caf::actor_system& sys, const local_servers& servers,
                                   const msg::partition_key& key, std::uint64_t version,
                                   const std::array<const storage::checkpoint_file*, 2>& files, std::size_t target,
                                   caf::timespan deadline);

/// Every server removes the table files of its checkpoint path that `keep`
/// does not name; one line per server that could not.
std::vector<std::string> prune_local_tables(caf::actor_system& sys, const local_servers& servers,
                                            const std::set<std::string>& keep, caf::timespan deadline);

} // namespace abg::actors
