#include "runtime/train/node_memory.h"

#include <algorithm>

namespace abg::train {

std::uint64_t table_bytes(const plan& p, type_partition t) {
  return static_cast<std::uint64_t>(p.count(t)) * static_cast<std::uint64_t>(p.dim(t.type) + p.model.state_width(t.type)) *
         sizeof(float);
}

std::vector<node_memory> node_memory_needs(const plan& p, const cluster_spec& cluster) {
  std::vector<node_memory> out(cluster.nodes.size());
  const auto servers = cluster.with(role::partition_server);
  const auto shards = cluster.with(role::parameter_server);
  const bool sharing = cluster.count(role::trainer) > 1;
  std::uint64_t largest_table = 0, unpartitioned = 0;
  for (auto t : p.all_tables()) {
    const auto bytes = table_bytes(p, t);
    largest_table = std::max(largest_table, bytes);
    if (p.unpartitioned(t.type)) {
      unpartitioned += bytes;
      continue;
    }
    if (!servers.empty()) out[servers[static_cast<std::size_t>(t.part) % servers.size()]].partitions += bytes;
  }
  // The largest bucket: its tables, and its edges (ids, relation, weight) as read from its file.
  std::uint64_t bucket = 0;
  for (std::int32_t i = 0; i < p.nparts_lhs; ++i)
    for (std::int32_t j = 0; j < p.nparts_rhs; ++j) {
      std::uint64_t bytes = 0;
      for (auto t : p.partitions_of({i, j})) bytes += table_bytes(p, t);
      bucket = std::max(bucket, bytes);
    }
  std::uint64_t edges = 0;
  for (const auto& m : p.manifests)
    for (const auto& b : m.buckets)
      edges = std::max(edges, b.edges * (3 * std::uint64_t{m.id_width} + (m.has_weights ? sizeof(float) : 0)));
  for (std::size_t i = 0; i < cluster.nodes.size(); ++i) {
    const auto& n = cluster.nodes[i];
    if (n.has(role::trainer)) out[i].trainer = bucket + edges;
    if (sharing && n.has(role::parameter_server) && !shards.empty()) out[i].parameters = unpartitioned / shards.size();
    if (n.has(role::coordinator)) out[i].checkpoint = largest_table;
  }
  return out;
}

} // namespace abg::train
