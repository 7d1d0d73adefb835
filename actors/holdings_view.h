// The console's `partitions` and `params` views and the bytes each node
// holds (docs/console.md), from what the roles answered when asked: each
// partition server's list of partitions, each trainer's status (the tables
// it holds, its shared parameters) and each parameter-server shard's
// counters. A role that did not answer is missing from its node's row.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "messages/payloads.h"

namespace abg::actors {

struct node_holdings {
  std::string name;
  std::optional<std::uint32_t> trainer; // its trainer's id
  std::optional<msg::trainer_status> trainer_status;
  std::optional<std::vector<msg::partition_info>> stored; // its partition server's
  std::optional<msg::param_status> shard;                 // its parameter server's
};

/// A table's bytes: float32 embeddings and their optimizer state.
std::uint64_t table_bytes(const msg::partition_info& t);

/// {"partitions": [{entity, part, rows, dim, bytes, stored_on: [{node,
/// version}], held_by: [{node, trainer, version}]}]}, one row per table,
/// by entity and part.
nlohmann::json partition_rows(const std::vector<node_holdings>& nodes);

/// {"shards": [{node, names, bytes, pushes, pulls, pushed_bytes,
/// pulled_bytes, seconds, pushes_per_second, pulls_per_second}]}.
nlohmann::json param_rows(const std::vector<node_holdings>& nodes);

/// What a node holds in memory: partitions (stored and held for training)
/// and parameters (shards and a trainer's shared parameters), in bytes.
struct held_bytes {
  std::uint64_t partitions = 0, parameters = 0;
};
held_bytes held_by(const node_holdings& node);

} // namespace abg::actors
