// A training run's plan: what is fixed for the whole run and the same on
// every node that reads the same config and data: the imported graph's
// metadata, the model, the iterations (epoch, edge path, edge chunk) and which
// partitions a bucket reads. Torch-free and actor-free.
#pragma once

#include <cstdint>
#include <set>
#include <utility>
#include <vector>

#include "abg/config.h"
#include "abg/error.h"
#include "abg/model/desc.h"
#include "abg/storage/checkpoint.h"
#include "abg/storage/edge_manifest.h"
#include "abg/storage/entity_store.h"
#include "runtime/schedule/bucket_scheduler.h"

namespace abg::train {

/// One partition of one entity type (type index into model.entity_types).
struct type_partition {
  std::size_t type = 0;
  std::int64_t part = 0;
  auto operator<=>(const type_partition&) const = default;
};

struct plan {
  const config* cfg = nullptr;
  storage::entity_store_meta meta;
  model::model_desc model;
  std::vector<storage::edge_manifest> manifests;
  std::vector<std::int64_t> type_partitions; // per model entity type
  std::set<std::size_t> lhs_types, rhs_types;
  int32_t nparts_lhs = 1, nparts_rhs = 1;
  /// One partitioned entity type plays both sides: partition k of either
  /// side is one partition (one lock, one version).
  bool shared_partitions = false;
  std::int64_t chunks = 1;
  std::int64_t iterations = 0;

  storage::checkpoint_position position(std::int64_t iteration) const;
  std::int64_t iteration_of(const storage::checkpoint_position& p) const;
  std::int64_t iterations_per_epoch() const;
  /// The tables bucket b reads.
  std::set<type_partition> partitions_of(schedule::bucket b) const;
  /// The tables behind one of the scheduler's lockable partitions.
  std::vector<type_partition> tables_of(schedule::part_key k) const;
  /// The scheduler's lock covering a table (nullopt: unpartitioned, never locked).
  std::optional<schedule::part_key> lock_of(type_partition t) const;
  bool unpartitioned(std::size_t type) const { return type_partitions[type] == 1; }
  std::int64_t count(type_partition t) const;
  std::int64_t dim(std::size_t type) const { return model.dims[type]; }
  const std::string& type_name(std::size_t type) const { return model.entity_types[type]; }
  /// Every table of the model, types in config order, partitions ascending.
  std::vector<type_partition> all_tables() const;
  /// The lock server's configuration (order, grid, first-epoch rule) for `trainers` trainers.
  schedule::scheduler_config scheduler(std::uint64_t seed, std::int32_t trainers) const;
};

/// Reads the entity path's metadata and every edge path's manifest and
/// checks them against the config.
expected<plan> make_plan(const config& cfg);

} // namespace abg::train
