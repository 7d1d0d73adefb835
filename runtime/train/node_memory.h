// What each node of a cluster holds in memory for a run, from the plan and
// the layout: the pre-flight check compares it with each node's free memory
// (`abg cluster check`, docs/cluster.md). A table is its embeddings and its
// optimizer state: count x (dimension + 1) floats, or count x 2·dimension
// with element-wise Adagrad (entity_optimizer = "adagrad").
#pragma once

#include <cstdint>
#include <vector>

#include "abg/cluster.h"
#include "runtime/train/plan.h"

namespace abg::train {

struct node_memory {
  std::uint64_t partitions = 0; // partition server: the partitions it stores (partition k on server k mod count)
  std::uint64_t trainer = 0;    // trainer: the tables of its largest bucket (unpartitioned ones too) and its edges
  std::uint64_t parameters = 0; // parameter-server shard: its share of the unpartitioned tables (several trainers)
  std::uint64_t checkpoint = 0; // coordinator: the largest table (seeding the servers builds one at a time)
  std::uint64_t total() const { return partitions + trainer + parameters + checkpoint; }
};

/// Bytes of one table in memory.
std::uint64_t table_bytes(const plan& p, type_partition t);

/// Per node of `cluster`, in its order.
std::vector<node_memory> node_memory_needs(const plan& p, const cluster_spec& cluster);

} // namespace abg::train
