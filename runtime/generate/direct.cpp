#include "abg/generate/direct.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "abg/storage/bucket_file.h"
#include "abg/storage/edge_manifest.h"
#include "abg/storage/entity_store.h"
#include "abg/storage/files.h"
#include "runtime/generate/ordered_blocks.h"

namespace abg::generate {

namespace fs = std::filesystem;

namespace {

// Partition p holds ids [first_id(p), first_id(p + 1)). Ids stay below 2^40
// and partitions below 2^16 (check and check_direct): products fit 64 bits.
struct partitioning {
  std::uint64_t n = 0, parts = 1;
  std::uint64_t first_id(std::uint64_t p) const { return (p * n + parts - 1) / parts; }
  std::uint64_t of(std::uint64_t id) const { return id * parts / n; }
};

// One edge as the bucket files hold it.
struct placed_edge {
  std::uint32_t bucket, lhs, rhs, rel;
};

void place(const graph_generator& g, const partitioning& parts, std::uint64_t block, std::vector<placed_edge>& out) {
  out.clear();
  g.for_each_edge(block, [&](const edge& e) {
    const auto lp = parts.of(e.head), rp = parts.of(e.tail);
    out.push_back({static_cast<std::uint32_t>(lp * parts.parts + rp), static_cast<std::uint32_t>(e.head - parts.first_id(lp)),
                   static_cast<std::uint32_t>(e.tail - parts.first_id(rp)), static_cast<std::uint32_t>(e.relation)});
  });
}

} // namespace

expected<void> check_direct(const config& cfg, const graph_spec& spec) {
  if (auto ok = check(spec); !ok)
    return ok;
  if (cfg.entities.size() != 1)
    return fail("--direct: the config has {} entity types; a generated graph has one: give the config exactly one "
                "[entities.NAME]",
                cfg.entities.size());
  const auto& [type, schema] = cfg.entities.front();
  if (schema.featurized)
    return fail("--direct: entity type '{}' is featurized; a generated graph has plain entities", type);
  if (cfg.partition_balance != "entities")
    return fail("--direct: writes PBG's partitions of equal entity counts; for partition_balance = \"{}\" write the "
                "TSV (abg generate OUT.tsv ...) and import it",
                cfg.partition_balance);
  const auto parts = static_cast<std::uint64_t>(schema.num_partitions);
  if (parts > 65535)
    return fail("--direct: entities.{}.num_partitions = {}: at most 65535 partitions", type, parts);
  if (spec.entities < parts)
    return fail("--direct: {} entities cannot fill entities.{}.num_partitions = {}", spec.entities, type, parts);
  if ((spec.entities + parts - 1) / parts > UINT32_MAX)
    return fail("--direct: {} entities in {} partitions put more than 2^32 in one; raise entities.{}.num_partitions",
                spec.entities, parts, type);
  if (cfg.edge_paths.size() != 1)
    return fail("--direct: the config has {} edge_paths; a generated graph fills one: give exactly one",
                cfg.edge_paths.size());
  if (!cfg.dynamic_relations && cfg.relations.size() != spec.relations)
    return fail("--direct: the config defines {} relations but --relations is {}; make them equal or set "
                "dynamic_relations = true",
                cfg.relations.size(), spec.relations);
  for (auto& r : cfg.relations)
    if (r.lhs != type || r.rhs != type)
      return fail("--direct: relation '{}' goes from '{}' to '{}'; a generated graph's relations go from '{}' to "
                  "itself",
                  r.name, r.lhs, r.rhs, type);
  std::error_code ec;
  if (fs::exists(storage::entity_meta_file(cfg.entity_path), ec))
    return fail("--direct: entity path {} is already imported; generate into a new entity_path",
                cfg.entity_path);
  return {};
}

expected<direct_report> write_dataset(const config& cfg, const graph_spec& spec, unsigned threads,
                                      const std::function<void(std::string_view, std::uint64_t)>& progress) {
  if (auto ok = check_direct(cfg, spec); !ok)
    return std::unexpected(ok.error());
  const auto start = std::chrono::steady_clock::now();
  auto note = [&](std::string_view phase, std::uint64_t edges) {
    if (progress)
      progress(phase, edges);
  };
  const fs::path entity_path = cfg.entity_path, edge_path = cfg.edge_paths.front();
  auto entity_lock = storage::directory_lock::acquire(entity_path, "abg generate --direct");
  if (!entity_lock)
    return std::unexpected(entity_lock.error());
  auto edge_lock = storage::directory_lock::acquire(edge_path, "abg generate --direct");
  if (!edge_lock)
    return std::unexpected(edge_lock.error());

  const auto& type = cfg.entities.front().first;
  const partitioning parts{spec.entities, static_cast<std::uint64_t>(cfg.entities.front().second.num_partitions)};
  const graph_generator g(spec);
  const auto buckets = parts.parts * parts.parts;

  // Pass 1: every bucket's size (the bucket files are written at their final
  // size), generating on every thread.
  std::vector<std::uint64_t> sizes(buckets);
  {
    std::mutex merge;
    std::atomic<std::uint64_t> next{0};
    std::vector<std::jthread> workers;
    for (unsigned t = 0; t < std::max(1u, threads); ++t)
      workers.emplace_back([&] {
        std::vector<std::uint64_t> mine(buckets);
        for (auto b = next++; b < g.blocks(); b = next++)
          g.for_each_edge(b, [&](const edge& e) { ++mine[parts.of(e.head) * parts.parts + parts.of(e.tail)]; });
        std::lock_guard lock(merge);
        for (std::size_t i = 0; i < buckets; ++i)
          sizes[i] += mine[i];
      });
  }
  note("counting", spec.edges);

  // The dictionaries: names files, then entities.json (the commit point).
  storage::entity_store_meta meta;
  meta.id = storage::dataset_id::random();
  meta.dynamic_relations = cfg.dynamic_relations;
  std::vector<std::int64_t> counts;
  for (std::uint64_t p = 0; p < parts.parts; ++p) {
    const auto first = parts.first_id(p), last = parts.first_id(p + 1);
    std::string text;
    std::vector<std::size_t> ends;
    for (auto id = first; id < last; ++id) {
      append_entity_name(text, id);
      ends.push_back(text.size());
    }
    std::vector<std::string_view> names;
    names.reserve(ends.size());
    for (std::size_t i = 0, begin = 0; i < ends.size(); begin = ends[i++])
      names.emplace_back(text.data() + begin, ends[i] - begin);
    if (auto ok = storage::write_entity_names(entity_path, meta.id, type, static_cast<std::int64_t>(p), names); !ok)
      return std::unexpected(ok.error());
    counts.push_back(static_cast<std::int64_t>(last - first));
  }
  meta.types.push_back({type, counts});
  if (cfg.dynamic_relations) {
    for (std::uint64_t r = 0; r < spec.relations; ++r) {
      std::string name;
      append_relation_name(name, r);
      meta.relation_names.push_back(std::move(name));
    }
  } else {
    for (auto& r : cfg.relations)
      meta.relation_names.push_back(r.name);
  }
  if (auto ok = storage::write_entity_meta(entity_path, meta); !ok)
    return std::unexpected(ok.error());

  // Pass 2: the bucket files, at most 256 open at once (one generation per group).
  storage::edge_manifest manifest;
  manifest.id = meta.id;
  manifest.lhs_partitions = manifest.rhs_partitions = static_cast<std::int64_t>(parts.parts);
  manifest.entity_types.push_back({type, counts});
  manifest.num_relations = meta.relation_names.size();
  manifest.id_width = 4;
  manifest.sources.push_back(fmt::format("abg generate --entities {} --edges {} --relations {} --power-law {} --seed {}",
                                         spec.entities, spec.edges, spec.relations, spec.power_law, spec.seed));
  direct_report report;
  constexpr std::uint64_t group = 256;
  for (std::uint64_t first = 0; first < buckets; first += group) {
    const auto last = std::min(buckets, first + group);
    std::vector<std::optional<storage::bucket_writer>> writers(last - first);
    std::size_t open = 0;
    for (auto b = first; b < last; ++b)
      open += sizes[b] > 0;
    const auto buffer_edges = std::max<std::size_t>(1024, (32u << 20) / (16 * std::max<std::size_t>(open, 1)));
    for (auto b = first; b < last; ++b) {
      if (sizes[b] == 0)
        continue;
      const auto lhs = static_cast<std::int64_t>(b / parts.parts), rhs = static_cast<std::int64_t>(b % parts.parts);
      auto w = storage::bucket_writer::create(edge_path / storage::bucket_file_name(lhs, rhs), meta.id,
                                              {sizes[b], 4, false}, buffer_edges);
      if (!w)
        return std::unexpected(w.error());
      writers[b - first].emplace(std::move(*w));
    }
    expected<void> status;
    std::uint64_t done = 0;
    ordered_blocks<std::vector<placed_edge>> blocks(
      g.blocks(), threads, [] { return std::vector<placed_edge>(); },
      [&](std::uint64_t b, std::vector<placed_edge>& out) { place(g, parts, b, out); });
    blocks.for_each([&](std::uint64_t, const std::vector<placed_edge>& edges) {
      for (auto& e : edges)
        if (e.bucket >= first && e.bucket < last)
          if (status = writers[e.bucket - first]->append(e.lhs, e.rhs, e.rel, 1.0f); !status)
            return false;
      done += edges.size();
      note("writing buckets", done);
      return true;
    });
    if (!status)
      return std::unexpected(status.error());
    for (auto b = first; b < last; ++b) {
      if (!writers[b - first])
        continue;
      auto sum = writers[b - first]->commit();
      if (!sum)
        return std::unexpected(sum.error());
      const auto lhs = static_cast<std::int64_t>(b / parts.parts), rhs = static_cast<std::int64_t>(b % parts.parts);
      manifest.buckets.push_back({lhs, rhs, sizes[b], storage::bucket_file_name(lhs, rhs), *sum});
    }
  }
  if (auto ok = storage::fsync_directory(edge_path); !ok)
    return std::unexpected(ok.error());
  if (auto ok = storage::write_edge_manifest(edge_path, manifest); !ok)
    return std::unexpected(ok.error());
  report.edges = manifest.total_edges();
  report.buckets = manifest.buckets.size();
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return report;
}

} // namespace abg::generate
