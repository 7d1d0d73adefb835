#include "runtime/simulate/graph_of.h"

#include <algorithm>
#include <map>
#include <set>
#include <string>

#include <fmt/format.h>

#include "abg/model/desc.h"
#include "abg/storage/edge_manifest.h"
#include "abg/storage/entity_store.h"
#include "runtime/schedule/grid.h"

namespace abg::simulate {

namespace {

// Parameters of one relation operator of dimension d, as the model describes them.
std::uint64_t operator_floats(const std::string& op, std::int64_t d) {
  auto kind = model::parse_operator(op);
  std::uint64_t out = 0;
  if (!kind) return out; // the config was validated: every operator name parses
  for (const auto& [name, shape] : model::operator_params(*kind, d)) {
    std::uint64_t n = 1;
    for (auto x : shape) n *= static_cast<std::uint64_t>(x);
    out += n;
  }
  return out;
}

} // namespace

expected<graph_model> graph_of(const config& cfg, std::optional<graph_size> size) {
  const auto grid = schedule::grid_of(cfg);
  graph_model g;
  g.schedule.nparts_lhs = grid.lhs;
  g.schedule.nparts_rhs = grid.rhs;
  g.schedule.shared_partitions = grid.shared;
  g.schedule.order = schedule::parse_bucket_order(cfg.bucket_order).value_or(schedule::bucket_order::inside_out);
  g.schedule.seed = static_cast<std::uint64_t>(cfg.seed.value_or(0));
  g.schedule.buffer_capacity = static_cast<std::int32_t>(cfg.buffer_capacity);
  const auto cells = static_cast<std::size_t>(grid.lhs) * static_cast<std::size_t>(grid.rhs);
  g.bucket_edges.assign(cells, 0);
  g.partition_bytes[0].assign(static_cast<std::size_t>(grid.lhs), 0);
  g.partition_bytes[1].assign(grid.shared ? 0 : static_cast<std::size_t>(grid.rhs), 0);

  // Entities per (type, partition).
  std::map<std::string, std::vector<std::int64_t>> counts;
  std::uint64_t relations = cfg.relations.size();
  if (size) {
    for (auto& [name, e] : cfg.entities) {
      auto& c = counts[name];
      const auto parts = static_cast<std::uint64_t>(e.num_partitions);
      for (std::uint64_t p = 0; p < parts; ++p)
        c.push_back(static_cast<std::int64_t>((p + 1) * size->entities / parts - p * size->entities / parts));
    }
    for (std::size_t i = 0; i < cells; ++i)
      g.bucket_edges[i] = (i + 1) * size->edges / cells - i * size->edges / cells;
  } else {
    auto meta = storage::read_entity_meta(cfg.entity_path);
    if (!meta) return std::unexpected(meta.error());
    for (auto& t : meta->types) counts[t.name] = t.counts;
    relations = cfg.dynamic_relations ? meta->relation_names.size() : cfg.relations.size();
    for (auto& path : cfg.edge_paths) {
      auto manifest = storage::read_edge_manifest_for(path, meta->id, cfg.entity_path, grid.lhs, grid.rhs);
      if (!manifest) return std::unexpected(manifest.error());
      for (auto& b : manifest->buckets)
        g.bucket_edges[static_cast<std::size_t>(b.lhs) * static_cast<std::size_t>(grid.rhs) +
                       static_cast<std::size_t>(b.rhs)] += b.edges;
    }
  }

  std::set<std::string> sides[2];
  for (auto& r : cfg.relations) {
    sides[0].insert(r.lhs);
    sides[1].insert(r.rhs);
  }
  for (auto& [name, e] : cfg.entities) {
    auto it = counts.find(name);
    if (it == counts.end())
      return fail("entity type '{}' is not in entity path {}; run `abg import`", name, cfg.entity_path);
    for (auto n : it->second) g.partition_rows[name] = std::max(g.partition_rows[name], n);
    const auto dim = cfg.dimension_of(name);
    const auto row = static_cast<std::uint64_t>(dim + (cfg.entity_optimizer == "adagrad" ? dim : 1)) * sizeof(float);
    if (e.num_partitions <= 1) {
      for (auto n : it->second) g.shared_bytes += static_cast<std::uint64_t>(n) * row;
      continue;
    }
    for (int side = 0; side < 2; ++side) {
      if (!sides[side].contains(name) || (side == 1 && grid.shared)) continue;
      for (std::size_t p = 0; p < it->second.size() && p < g.partition_bytes[side].size(); ++p)
        g.partition_bytes[side][p] += static_cast<std::uint64_t>(it->second[p]) * row;
    }
  }
  g.relation_ids = static_cast<std::int64_t>(relations);
  // Operators: one per relation (dynamic relations: one per side).
  for (std::uint64_t r = 0; r < relations; ++r) {
    const auto& schema = cfg.relations[cfg.dynamic_relations ? 0 : r];
    const auto d = cfg.dimension_of(schema.rhs);
    g.shared_bytes += (cfg.dynamic_relations ? 2 : 1) * 2 * operator_floats(schema.operator_, d) * sizeof(float);
  }
  return g;
}

} // namespace abg::simulate
