// What the cluster simulator trains (runtime/simulate/cluster_sim.h), from a
// config: its imported data, or a graph of a given size with its schema.
#pragma once

#include <cstdint>
#include <optional>

#include "abg/config.h"
#include "abg/error.h"
#include "runtime/simulate/cluster_sim.h"

namespace abg::simulate {

/// A graph that is not imported: every entity type holds `entities`,
/// spread evenly over its partitions, and `edges` spread evenly over the
/// buckets.
struct graph_size {
  std::uint64_t entities = 0, edges = 0;
};

/// The model of `cfg`'s graph: the entity path's partition counts and the
/// buckets of every edge path together, or, given `size`, that graph. Each
/// row costs (dimension + 1) floats (embedding and row-wise Adagrad state;
/// 2·dimension with entity_optimizer = "adagrad");
/// shared: unpartitioned tables and the relation operators with their
/// (element-wise) Adagrad state.
expected<graph_model> graph_of(const config& cfg, std::optional<graph_size> size);

} // namespace abg::simulate
