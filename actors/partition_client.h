// A partition moving between a trainer (or the coordinator) and a partition
// server: blocking calls for a worker thread, never for an actor's handler.
// Between processes a partition travels as row chunks well below Cap'n
// Proto's frame limit, several in flight at once; in one process as one
// message sharing the table's memory.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include <caf/all.hpp>

#include "abg/error.h"
#include "abg/model/model.h"
#include "actors/traffic.h"
#include "messages/interfaces.h"

namespace abg::actors {

/// Payload bytes of one chunk, and how many chunks travel at once.
inline constexpr std::uint64_t partition_chunk_bytes = 8u << 20;
inline constexpr int partition_chunks_in_flight = 4;

/// A partition server: its actor and, when it is in another process, its
/// bulk channel ("host:port"), which moves the partition's rows without
/// copies, the bytes counted as traffic of the caller's purpose. Empty for
/// a server in the caller's process: messages share the tables' memory.
struct partition_server_ref {
  msg::partition_server_actor actor;
  std::string bulk;
};

/// The partition server that holds partition `part` of every entity type (PBG's placement).
const partition_server_ref& server_of(const std::vector<partition_server_ref>& servers, std::int64_t part);

struct fetched_table {
  model::table table;
  std::uint64_t version = 0;
};

/// Fetches a whole partition, refusing a stored version older than
/// `min_version`. Fails at once when the server goes down or `stop` is set.
expected<fetched_table> fetch_table(caf::actor_system& sys, const partition_server_ref& server,
                                    const msg::partition_key& key, std::uint64_t min_version, caf::timespan deadline,
                                    const std::atomic<bool>* stop = nullptr,
                                    traffic::kind purpose = traffic::kind::swaps);

/// Where stream_table() puts a partition as it arrives.
struct table_sink {
  /// The partition's size, before any value: rows x dim embeddings and
  /// state_width (1 or dim) optimizer values per row.
  std::function<expected<void>(std::uint64_t rows, std::int64_t dim, std::int64_t state_width)> begin;
  /// Every embedding in C order, then every optimizer value, a chunk at a time.
  std::function<expected<void>(std::span<const float>)> values;
};

/// Fetches a partition from a server in another process (its bulk channel)
/// a chunk at a time into `sink`, never holding more than one chunk, so a
/// checkpoint gathered from other nodes writes partitions of any size in
/// bounded memory. The version fetched.
expected<std::uint64_t> stream_table(caf::actor_system& sys, const partition_server_ref& server,
                                     const msg::partition_key& key, std::uint64_t min_version, caf::timespan deadline,
                                     const table_sink& sink, traffic::kind purpose = traffic::kind::checkpoints);

/// Stores `t` as version `version`, replacing `base_version` (msg::any_version:
/// whatever is there). In one process the server may share `t`'s memory:
/// the caller must not modify `t` afterwards.
expected<void> store_table(caf::actor_system& sys, const partition_server_ref& server,
                           const msg::partition_key& key, const model::table& t, std::uint64_t version,
                           std::uint64_t base_version, caf::timespan deadline, const std::atomic<bool>* stop = nullptr,
                           traffic::kind purpose = traffic::kind::swaps);

} // namespace abg::actors
