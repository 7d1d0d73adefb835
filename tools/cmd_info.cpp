// `abg info`: a summary of what the config's entity path and edge paths hold.
#include <algorithm>
#include <map>
#include <optional>
#include <set>

#include "abg/storage/bucket_file.h"
#include "abg/storage/edge_manifest.h"
#include "abg/storage/entity_store.h"
#include "runtime/schedule/bucket_scheduler.h"
#include "runtime/schedule/buffer_loads.h"
#include "runtime/schedule/grid.h"
#include "tools/commands.h"
#include "tools/config_options.h"

namespace abg::tools {

namespace {

struct info_args {
  config_args config;
  bool edges = false;
  std::size_t top = 5;
  bool schedule = false;
  std::optional<std::int32_t> capacity; // default: the config's buffer_capacity, else 4
};

// Partition loads per epoch of every bucket order for a trainer that holds
// at most `capacity` partitions.
void print_schedule(const config& cfg, std::int32_t capacity) {
  const auto g = schedule::grid_of(cfg);
  fmt::print("partition loads per epoch, {}x{} buckets{}, a trainer holding at most {} partitions:\n", g.lhs, g.rhs,
             g.shared ? " (one partitioned type on both sides)" : "", capacity);
  const auto seed = static_cast<std::uint64_t>(cfg.seed.value_or(0));
  for (auto order : {schedule::bucket_order::inside_out, schedule::bucket_order::outside_in,
                     schedule::bucket_order::affinity, schedule::bucket_order::random}) {
    const auto buckets = schedule::make_bucket_order(g.lhs, g.rhs, order, seed);
    fmt::print("  {:<12} {:>8} evicting the least recently used, {:>8} evicting the one needed last\n",
               schedule::to_string(order),
               schedule::count_loads(buckets, capacity, g.shared, schedule::eviction::least_recently_used),
               schedule::count_loads(buckets, capacity, g.shared, schedule::eviction::needed_last));
  }
  const auto ours = schedule::make_buffer_order(g.lhs, g.rhs, capacity, g.shared);
  fmt::print("  {:<12} {:>8} evicting the least recently used, {:>8} evicting the one needed last (buffer order)\n",
             "buffer", schedule::count_loads(ours, capacity, g.shared, schedule::eviction::least_recently_used),
             schedule::count_loads(ours, capacity, g.shared, schedule::eviction::needed_last));
  // What a run does with this capacity: its lock server's rule.
  const schedule::bucket_scheduler run_rule({.nparts_lhs = g.lhs, .nparts_rhs = g.rhs,
                                             .shared_partitions = g.shared, .buffer_capacity = capacity});
  if (run_rule.read_ahead_slots() > 0) {
    const auto planned = run_rule.planned_capacity();
    const auto run_order = schedule::make_buffer_order(g.lhs, g.rhs, planned, g.shared);
    fmt::print("a run's only trainer with buffer_capacity = {} keeps one of them to read the next bucket's partitions "
               "ahead while it trains, and plans for {}: in the buffer order it loads {} partitions an epoch\n",
               capacity, planned, schedule::count_loads(run_order, planned, g.shared, schedule::eviction::needed_last));
  }
}

// Reads every bucket of an edge path: validates it against the entity path and
// tallies edges per relation and degrees per (type, partition, offset).
expected<void> scan_edges(const std::filesystem::path& dir, const storage::edge_manifest& manifest,
                          const storage::entity_store_meta& meta, const config& cfg,
                          std::vector<std::uint64_t>& per_relation,
                          std::map<std::pair<std::string, std::int64_t>, std::vector<std::uint32_t>>& degree) {
  for (auto& b : manifest.buckets) {
    auto reader = storage::bucket_reader::open(dir / b.file, &meta.id);
    if (!reader)
      return std::unexpected(reader.error());
    if (reader->size() != b.edges || reader->checksum() != b.checksum)
      return fail("{} does not match {} (edges or checksum differ); re-run `abg import`", (dir / b.file).string(),
                  storage::edge_manifest_file(dir).string());
    for (std::uint64_t i = 0; i < reader->size(); ++i) {
      auto rel = reader->rel(i);
      if (rel >= meta.relation_names.size())
        return fail("{}: edge {} has relation id {}, the entity path has {} relations", (dir / b.file).string(), i,
                    rel, meta.relation_names.size());
      ++per_relation[rel];
      const auto& schema = cfg.relations[cfg.dynamic_relations ? 0 : rel];
      for (auto [type, part, id] : {std::tuple{&schema.lhs, b.lhs, reader->lhs(i)},
                                    std::tuple{&schema.rhs, b.rhs, reader->rhs(i)}}) {
        auto* t = meta.type(*type);
        auto p = std::min<std::int64_t>(part, t ? t->num_partitions() - 1 : 0);
        if (!t || id >= static_cast<std::uint64_t>(t->counts[static_cast<std::size_t>(p)]))
          return fail("{}: edge {} refers to entity {} of type '{}' partition {}, which does not exist",
                      (dir / b.file).string(), i, id, *type, p);
        auto& d = degree[{*type, p}];
        if (d.empty())
          d.resize(static_cast<std::size_t>(t->counts[static_cast<std::size_t>(p)]));
        ++d[id];
      }
    }
  }
  return {};
}

void run(const info_args& args) {
  auto cfg = load_config_or_report(args.config);
  if (!cfg) {
    exit_code() = 1;
    return;
  }
  auto report = [](const error& e) {
    fmt::print(stderr, "error: {}\n", e.message);
    exit_code() = 1;
  };
  if (args.schedule) {
    const auto capacity =
      args.capacity.value_or(cfg->buffer_capacity > 0 ? static_cast<std::int32_t>(cfg->buffer_capacity) : 4);
    if (capacity < 2) {
      fmt::print(stderr, "error: --capacity {}: a bucket needs 2 partitions; give at least 2\n", capacity);
      exit_code() = 1;
      return;
    }
    return print_schedule(*cfg, capacity);
  }
  auto meta = storage::read_entity_meta(cfg->entity_path);
  if (!meta)
    return report(meta.error());
  fmt::print("entity path {} (dataset {})\n", cfg->entity_path, meta->id.hex());
  for (auto& t : meta->types)
    fmt::print("  entity type {}: {} entities in {} partition(s) [{}]\n", t.name, t.total(), t.num_partitions(),
               fmt::join(t.counts, ", "));
  fmt::print("  {} relation type(s){}\n", meta->relation_names.size(), meta->dynamic_relations ? " (dynamic)" : "");
  std::vector<std::uint64_t> per_relation(meta->relation_names.size(), 0);
  std::map<std::pair<std::string, std::int64_t>, std::vector<std::uint32_t>> degree;
  for (auto& path : cfg->edge_paths) {
    auto manifest = storage::read_edge_manifest(path);
    if (!manifest)
      return report(manifest.error());
    if (manifest->id != meta->id)
      return report(error{fmt::format("edge path {} was imported from dataset {}, the entity path is dataset {}; "
                                      "re-import it",
                                      path, manifest->id.hex(), meta->id.hex())});
    fmt::print("edge path {}: {} edges in {} bucket(s) of a {}x{} grid{}\n", path, manifest->total_edges(),
               manifest->buckets.size(), manifest->lhs_partitions, manifest->rhs_partitions,
               manifest->has_weights ? ", weighted" : "");
    if (args.edges)
      if (auto ok = scan_edges(path, *manifest, *meta, *cfg, per_relation, degree); !ok)
        return report(ok.error());
  }
  if (!args.edges)
    return;
  fmt::print("edges per relation (all edge paths, every bucket verified):\n");
  std::vector<std::size_t> order(per_relation.size());
  for (std::size_t i = 0; i < order.size(); ++i)
    order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](auto a, auto b) { return per_relation[a] > per_relation[b]; });
  for (auto r : order)
    fmt::print("  {:<24} {}\n", meta->relation_names[r], per_relation[r]);
  for (auto& [key, d] : degree) {
    auto names = storage::read_entity_names(cfg->entity_path, *meta, key.first, key.second);
    if (!names)
      return report(names.error());
    std::vector<std::uint32_t> top(d.size());
    for (std::uint32_t i = 0; i < top.size(); ++i)
      top[i] = i;
    auto k = std::min(args.top, top.size());
    std::partial_sort(top.begin(), top.begin() + static_cast<std::ptrdiff_t>(k), top.end(),
                      [&](auto a, auto b) { return d[a] > d[b]; });
    fmt::print("highest degree, type {} partition {}:", key.first, key.second);
    for (std::size_t i = 0; i < k; ++i)
      fmt::print(" {} ({})", (*names)[top[i]], d[top[i]]);
    fmt::print("\n");
  }
}

} // namespace

void register_info_command(CLI::App& app) {
  auto args = std::make_shared<info_args>();
  auto* cmd = app.add_subcommand("info", "Summarise the imported graph of a config: entity types and partitions, "
                                         "relation types, edge paths and their buckets.");
  add_config_args(*cmd, args->config);
  cmd->add_flag("--edges", args->edges,
                "Also read every bucket file: verify checksums and ids, count edges per relation and list the "
                "highest-degree entities");
  cmd->add_option("--top", args->top, "With --edges: how many highest-degree entities to list per partition")
    ->capture_default_str();
  cmd->add_flag("--schedule", args->schedule,
                "Instead: partition loads per epoch of every bucket order (PBG's and the buffer order) for a "
                "trainer that holds at most --capacity partitions, and those of a run with that buffer (one slot "
                "read ahead); needs only the config");
  cmd->add_option("--capacity", args->capacity,
                  "With --schedule: partitions a trainer holds at most (default: the config's buffer_capacity, "
                  "else 4)");
  cmd->callback([args] { run(*args); });
}

} // namespace abg::tools
