#include "runtime/train/plan.h"

#include <algorithm>

#include <fmt/format.h>

namespace abg::train {

storage::checkpoint_position plan::position(std::int64_t it) const {
  auto per_epoch = iterations_per_epoch();
  auto in_epoch = it % per_epoch;
  return {it / per_epoch, in_epoch / chunks, in_epoch % chunks, in_epoch == per_epoch - 1};
}

std::int64_t plan::iteration_of(const storage::checkpoint_position& p) const {
  return (p.epoch * static_cast<std::int64_t>(cfg->edge_paths.size()) + p.edge_path) * chunks + p.edge_chunk;
}

std::int64_t plan::iterations_per_epoch() const { return static_cast<std::int64_t>(cfg->edge_paths.size()) * chunks; }

std::set<type_partition> plan::partitions_of(schedule::bucket b) const {
  std::set<type_partition> out;
  for (auto t : lhs_types)
    out.insert({t, unpartitioned(t) ? 0 : b.lhs});
  for (auto t : rhs_types)
    out.insert({t, unpartitioned(t) ? 0 : b.rhs});
  return out;
}

std::optional<schedule::part_key> plan::lock_of(type_partition t) const {
  if (unpartitioned(t.type))
    return std::nullopt;
  if (shared_partitions)
    return schedule::part_key{0, static_cast<int32_t>(t.part)};
  return schedule::part_key{lhs_types.contains(t.type) ? 0 : 1, static_cast<int32_t>(t.part)};
}

std::vector<type_partition> plan::tables_of(schedule::part_key k) const {
  std::vector<type_partition> out;
  for (std::size_t t = 0; t < model.entity_types.size(); ++t) {
    if (unpartitioned(t) || (!lhs_types.contains(t) && !rhs_types.contains(t)))
      continue;
    if (auto l = lock_of({t, k.part}); l && *l == k && k.part < type_partitions[t])
      out.push_back({t, k.part});
  }
  return out;
}

std::int64_t plan::count(type_partition t) const {
  return meta.type(model.entity_types[t.type])->counts[static_cast<std::size_t>(t.part)];
}

std::vector<type_partition> plan::all_tables() const {
  std::vector<type_partition> out;
  for (std::size_t t = 0; t < model.entity_types.size(); ++t)
    for (std::int64_t part = 0; part < type_partitions[t]; ++part)
      out.push_back({t, part});
  return out;
}

schedule::scheduler_config plan::scheduler(std::uint64_t seed, std::int32_t trainers) const {
  schedule::scheduler_config sc;
  sc.nparts_lhs = nparts_lhs;
  sc.nparts_rhs = nparts_rhs;
  sc.order = schedule::parse_bucket_order(cfg->bucket_order).value_or(schedule::bucket_order::inside_out);
  sc.seed = seed;
  sc.shared_partitions = shared_partitions;
  sc.num_trainers = std::max<std::int32_t>(1, trainers);
  sc.tree_init_order = cfg->distributed_tree_init_order;
  sc.first_epoch = 0;
  sc.buffer_capacity = static_cast<std::int32_t>(cfg->buffer_capacity);
  return sc;
}

expected<plan> make_plan(const config& cfg) {
  plan p;
  p.cfg = &cfg;
  auto meta = storage::read_entity_meta(cfg.entity_path);
  if (!meta)
    return std::unexpected(meta.error());
  p.meta = std::move(*meta);
  auto m = model::model_desc::from(cfg, static_cast<std::int64_t>(p.meta.relation_names.size()));
  if (!m)
    return std::unexpected(m.error());
  p.model = std::move(*m);
  if (!cfg.dynamic_relations && p.meta.relation_names.size() < cfg.relations.size())
    return fail("entity path {} knows {} relation(s) but the config has {}; re-run `abg import`", cfg.entity_path,
                p.meta.relation_names.size(), cfg.relations.size());
  for (auto& name : p.model.entity_types) {
    auto* t = p.meta.type(name);
    if (!t)
      return fail("entity type '{}' is not in entity path {}; run `abg import` with this config first", name,
                  cfg.entity_path);
    p.type_partitions.push_back(t->num_partitions());
  }
  for (auto& r : p.model.relations) {
    p.lhs_types.insert(static_cast<std::size_t>(r.lhs_type));
    p.rhs_types.insert(static_cast<std::size_t>(r.rhs_type));
  }
  // Partitioned types of one side must agree on the partition count: bucket
  // (i, j) reads partition i of every lhs type.
  auto side_parts = [&](const std::set<std::size_t>& types, const char* side) -> expected<int32_t> {
    int32_t n = 1;
    for (auto t : types) {
      auto k = static_cast<int32_t>(p.type_partitions[t]);
      if (k > 1 && n > 1 && k != n)
        return fail("the {} entity types have different num_partitions ({} and {}); partitioned types on one side "
                    "must have the same number of partitions",
                    side, n, k);
      n = std::max(n, k);
    }
    return n;
  };
  auto nl = side_parts(p.lhs_types, "lhs");
  if (!nl)
    return std::unexpected(nl.error());
  auto nr = side_parts(p.rhs_types, "rhs");
  if (!nr)
    return std::unexpected(nr.error());
  p.nparts_lhs = *nl;
  p.nparts_rhs = *nr;
  // A partitioned type on both sides makes partition k of either side the same
  // partition: one lock per partition index.
  for (auto t : p.lhs_types)
    if (p.type_partitions[t] > 1 && p.rhs_types.contains(t))
      p.shared_partitions = true;
  if (p.shared_partitions && p.nparts_lhs != p.nparts_rhs)
    return fail("entity types partitioned on both sides need the same num_partitions on both sides ({} lhs, {} rhs)",
                p.nparts_lhs, p.nparts_rhs);
  for (auto& path : cfg.edge_paths) {
    auto manifest = storage::read_edge_manifest_for(path, p.meta.id, cfg.entity_path, p.nparts_lhs, p.nparts_rhs);
    if (!manifest)
      return std::unexpected(manifest.error());
    p.manifests.push_back(std::move(*manifest));
  }
  if (cfg.num_edge_chunks) {
    p.chunks = *cfg.num_edge_chunks;
  } else { // PBG: enough chunks that bucket (0, 0) of the first edge path fits max_edges_per_chunk
    std::uint64_t first = 0;
    for (auto& b : p.manifests.front().buckets)
      if (b.lhs == 0 && b.rhs == 0)
        first = b.edges;
    p.chunks = std::max<std::int64_t>(
      1, static_cast<std::int64_t>((first + static_cast<std::uint64_t>(cfg.max_edges_per_chunk) - 1) /
                                   static_cast<std::uint64_t>(cfg.max_edges_per_chunk)));
  }
  p.iterations = cfg.num_epochs * p.iterations_per_epoch();
  if (cfg.eval_fraction > 0 && cfg.eval_num_batch_negs.value_or(cfg.num_batch_negs) == 0 &&
      cfg.eval_num_uniform_negs.value_or(cfg.num_uniform_negs) == 0)
    return fail("eval_fraction = {} but evaluation has no negatives (eval_num_batch_negs = eval_num_uniform_negs = "
                "0); set one of them or eval_fraction = 0",
                cfg.eval_fraction);
  return p;
}

} // namespace abg::train
