// The importer: pass 1 parses every input once, interning names into per-type
// tables and spilling provisional-id records to disk; then the dictionaries are
// finalised (min counts, shuffle, partitions) and committed; pass 2 streams
// each spill into the bucket files of its edge path and commits its manifest.
#include "abg/import.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <chrono>
#include <cmath>
#include <functional>
#include <queue>
#include <random>
#include <set>

#include "abg/storage/bucket_file.h"
#include "abg/storage/edge_manifest.h"
#include "abg/storage/entity_store.h"
#include "runtime/import/name_table.h"
#include "runtime/import/spill_file.h"

namespace abg {

namespace fs = std::filesystem;
using import::name_table;
using import::spill_file;
using import::spill_record;

namespace {

constexpr std::uint32_t dropped = UINT32_MAX;

// partition_balance = "edges": the partition of each of `ids` (in that
// order). Every partition gets PBG's count (n / P, the first n mod P one
// more); the entities, most occurrences first (ties in the given, shuffled
// order), each go to the partition with the fewest occurrences so far among
// those below their count, so that every partition's rows and edge
// endpoints are both about 1/P of the total and buckets come out even.
std::vector<std::uint32_t> edge_balanced_partitions(const std::vector<std::uint32_t>& ids,
                                                    const std::vector<std::uint32_t>& occurrences,
                                                    std::int64_t num_partitions) {
  const auto n = ids.size();
  const auto parts = static_cast<std::size_t>(num_partitions);
  std::vector<std::size_t> order(n);
  for (std::size_t i = 0; i < n; ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return occurrences[ids[a]] > occurrences[ids[b]]; });
  std::vector<std::uint64_t> room(parts, n / parts);
  for (std::size_t p = 0; p < n % parts; ++p) ++room[p];
  using load = std::pair<std::uint64_t, std::uint32_t>; // (occurrences so far, partition)
  std::priority_queue<load, std::vector<load>, std::greater<>> lightest;
  for (std::uint32_t p = 0; p < parts; ++p)
    if (room[p] > 0) lightest.push({0, p});
  std::vector<std::uint32_t> out(n);
  for (auto i : order) {
    auto [sum, p] = lightest.top();
    lightest.pop();
    out[i] = p;
    if (--room[p] > 0) lightest.push({sum + occurrences[ids[i]], p});
  }
  return out;
}

struct type_state {
  std::string name;
  std::int64_t num_partitions = 1;
  name_table names;
  std::uint32_t existing = 0;           // ids below this were already in the entity path
  std::vector<std::int64_t> counts;     // entities per partition, existing ones included
  std::vector<std::uint32_t> seen;      // occurrences per id in this import (saturating)
  std::vector<std::uint32_t> partition; // final partition per id, `dropped` when filtered
  std::vector<std::uint32_t> offset;    // final offset within that partition
  std::set<std::int64_t> changed;       // partitions that gained entities
};

class clock {
public:
  double seconds() const { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count(); }

private:
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

// The partition shuffle's seed: the config's `seed` when it has one, so the
// same files and config import to the same partitions; the (random) dataset
// id otherwise. `salt` (the ids already assigned) makes an extension's
// shuffle differ from the first import's.
std::uint64_t shuffle_seed(const config& cfg, const storage::dataset_id& id, std::uint64_t salt) {
  std::uint64_t seed = salt;
  if (cfg.seed)
    return seed * 131 + static_cast<std::uint64_t>(*cfg.seed);
  for (auto b : id.bytes)
    seed = seed * 131 + b;
  return seed;
}

class importer {
public:
  importer(const config& cfg, const import_options& options, const import_callbacks& callbacks)
    : cfg_(cfg), opt_(options), cb_(callbacks) {}

  expected<import_report> run();

private:
  expected<void> check_arguments();
  expected<void> open_entity_path();
  expected<void> read_input(std::size_t index);
  expected<void> finalise_dictionaries();
  expected<void> write_edge_path(std::size_t index);

  void warn(std::string_view message) {
    if (cb_.warning)
      cb_.warning(message);
  }
  void progress(std::string_view phase, std::uint64_t edges, double done) {
    if (cb_.progress)
      cb_.progress(phase, edges, clock_.seconds(), done);
  }
  type_state& lhs_type(std::uint32_t rel) { return types_[rel_lhs_type_[cfg_.dynamic_relations ? 0 : rel]]; }
  type_state& rhs_type(std::uint32_t rel) { return types_[rel_rhs_type_[cfg_.dynamic_relations ? 0 : rel]]; }

  const config& cfg_;
  const import_options& opt_;
  const import_callbacks& cb_;
  clock clock_;
  import_report report_;

  fs::path entity_path_;
  std::vector<fs::path> edge_paths_;
  std::vector<storage::directory_lock> locks_;
  storage::entity_store_meta meta_;
  bool fresh_ = false;
  std::vector<type_state> types_;
  std::vector<std::size_t> rel_lhs_type_, rel_rhs_type_; // per config relation: index into types_
  name_table relations_;
  std::uint32_t existing_relations_ = 0;
  std::vector<std::uint64_t> relation_seen_;
  std::vector<std::uint32_t> relation_final_;
  std::int64_t lhs_partitions_ = 1, rhs_partitions_ = 1;
  std::vector<spill_file> spills_;
};

expected<void> importer::check_arguments() {
  if (opt_.inputs.size() != cfg_.edge_paths.size())
    return fail("{} input file(s) given but the config has {} edge_paths; give one input per edge path, in order",
                opt_.inputs.size(), cfg_.edge_paths.size());
  if (auto ok = opt_.check(); !ok)
    return ok;
  if (opt_.entity_min_count < 1 || opt_.relation_type_min_count < 1)
    return fail("--entity-min-count and --relation-type-min-count must be at least 1");
  if (!opt_.rel_col && cfg_.relations.size() > 1 && !cfg_.dynamic_relations)
    return fail("the config defines {} relations but no --rel-col was given; say which column names the relation",
                cfg_.relations.size());
  std::set<fs::path> seen;
  for (auto& p : cfg_.edge_paths) {
    auto normal = fs::absolute(p).lexically_normal();
    if (!seen.insert(normal).second)
      return fail("edge path {} appears twice in edge_paths", p);
    edge_paths_.push_back(p);
  }
  for (auto& input : opt_.inputs) {
    std::error_code ec;
    if (!fs::is_regular_file(input, ec))
      return fail("input file {} does not exist or is not a regular file", input.string());
  }
  return {};
}

expected<void> importer::open_entity_path() {
  entity_path_ = cfg_.entity_path;
  auto lock = storage::directory_lock::acquire(entity_path_, "abg import");
  if (!lock)
    return std::unexpected(lock.error());
  locks_.push_back(std::move(*lock));
  for (auto& ep : edge_paths_) {
    auto l = storage::directory_lock::acquire(ep, "abg import");
    if (!l)
      return std::unexpected(l.error());
    locks_.push_back(std::move(*l));
  }
  std::error_code ec;
  fresh_ = !fs::exists(entity_path_ / "entities.json", ec);
  if (fresh_) {
    meta_.id = storage::dataset_id::random();
    meta_.dynamic_relations = cfg_.dynamic_relations;
  } else {
    auto meta = storage::read_entity_meta(entity_path_);
    if (!meta)
      return std::unexpected(meta.error());
    meta_ = std::move(*meta);
    if (meta_.dynamic_relations != cfg_.dynamic_relations)
      return fail("entity path {} was imported with dynamic_relations = {}, the config says {}; use a new "
                  "entity_path or the same setting",
                  entity_path_.string(), meta_.dynamic_relations, cfg_.dynamic_relations);
  }
  // Entity types: the config's, each extended from the entity path when present there.
  for (auto& [name, schema] : cfg_.entities) {
    type_state t;
    t.name = name;
    t.num_partitions = schema.num_partitions;
    t.counts.assign(static_cast<std::size_t>(schema.num_partitions), 0);
    if (auto* old = meta_.type(name)) {
      if (old->num_partitions() != schema.num_partitions)
        return fail("entity type '{}' has {} partitions in entity path {} but the config says {}; partitions "
                    "cannot change after import: use a new entity_path",
                    name, old->num_partitions(), entity_path_.string(), schema.num_partitions);
      for (std::int64_t p = 0; p < schema.num_partitions; ++p) {
        auto names = storage::read_entity_names(entity_path_, meta_, name, p);
        if (!names)
          return std::unexpected(names.error());
        for (std::size_t i = 0; i < names->size(); ++i) {
          auto before = t.names.size();
          if (t.names.intern((*names)[i]) != before)
            return fail("entity names of type '{}' in {} hold '{}' twice; the entity path is corrupt", name,
                        entity_path_.string(), (*names)[i]);
          t.partition.push_back(static_cast<std::uint32_t>(p));
          t.offset.push_back(static_cast<std::uint32_t>(i));
        }
        t.counts[static_cast<std::size_t>(p)] = static_cast<std::int64_t>(names->size());
      }
      t.existing = static_cast<std::uint32_t>(t.names.size());
    }
    t.seen.assign(t.existing, 0);
    types_.push_back(std::move(t));
  }
  auto type_index = [&](const std::string& name) {
    for (std::size_t i = 0; i < types_.size(); ++i)
      if (types_[i].name == name)
        return i;
    return types_.size(); // unreachable: the config validated lhs/rhs
  };
  for (auto& r : cfg_.relations) {
    rel_lhs_type_.push_back(type_index(r.lhs));
    rel_rhs_type_.push_back(type_index(r.rhs));
    lhs_partitions_ = std::max(lhs_partitions_, types_[rel_lhs_type_.back()].num_partitions);
    rhs_partitions_ = std::max(rhs_partitions_, types_[rel_rhs_type_.back()].num_partitions);
  }
  // Relations: fixed from the config, or dynamic and extended from the entity path.
  if (cfg_.dynamic_relations) {
    for (auto& n : meta_.relation_names)
      relations_.intern(n);
    if (!opt_.rel_col && relations_.size() == 0)
      relations_.intern(cfg_.relations[0].name);
  } else {
    for (std::size_t i = 0; i < meta_.relation_names.size(); ++i)
      if (i >= cfg_.relations.size() || meta_.relation_names[i] != cfg_.relations[i].name)
        return fail("entity path {} was imported with relations [{}]; the config's relations must start with "
                    "the same names in the same order (new ones may be appended)",
                    entity_path_.string(), fmt::join(meta_.relation_names, ", "));
    for (auto& r : cfg_.relations)
      relations_.intern(r.name);
  }
  existing_relations_ = static_cast<std::uint32_t>(cfg_.dynamic_relations ? meta_.relation_names.size() : 0);
  relation_seen_.assign(relations_.size(), 0);
  return {};
}

expected<void> importer::read_input(std::size_t index) {
  const auto& input = opt_.inputs[index];
  auto reader = line_reader::open(input);
  if (!reader)
    return std::unexpected(reader.error());
  auto spill = spill_file::create(edge_paths_[index]);
  if (!spill)
    return std::unexpected(spill.error());

  const int needed = opt_.needed();
  std::vector<std::string_view> fields(static_cast<std::size_t>(needed));
  auto phase = fmt::format("reading {}", input.string());
  progress(phase, 0, 0.0);
  std::uint64_t line_number = 0, file_malformed = 0;
  auto malformed = [&](std::string_view line, std::string_view why) -> expected<void> {
    ++report_.malformed;
    ++file_malformed;
    auto where = fmt::format("{}:{}", input.string(), line_number);
    if (opt_.strict)
      return fail("{}: {} in \"{}\" (--strict stops at the first malformed line; drop --strict to skip and count "
                  "them)",
                  where, why, excerpt(line));
    if (report_.malformed <= opt_.max_reported)
      warn(fmt::format("{}: skipped malformed line: {}: \"{}\"", where, why, excerpt(line)));
    return {};
  };

  // Lines are validated one by one, then their entity names are looked up in
  // batches: hash and prefetch the whole batch first so the cache misses of
  // the table probes overlap instead of queueing.
  struct pending {
    std::string_view lhs, rhs;
    std::uint64_t lhs_hash, rhs_hash;
    std::uint32_t rel;
    float weight;
  };
  constexpr std::size_t batch_size = 32;
  std::array<pending, batch_size> batch;
  std::size_t queued = 0;
  auto drain = [&]() -> expected<void> {
    for (std::size_t k = 0; k < queued; ++k) {
      auto& e = batch[k];
      lhs_type(e.rel).names.prefetch_name(e.lhs_hash);
      rhs_type(e.rel).names.prefetch_name(e.rhs_hash);
    }
    for (std::size_t k = 0; k < queued; ++k) {
      auto& e = batch[k];
      auto& lt = lhs_type(e.rel);
      auto& rt = rhs_type(e.rel);
      auto l = lt.names.intern(e.lhs, e.lhs_hash);
      if (l == lt.seen.size())
        lt.seen.push_back(0);
      lt.seen[l] += lt.seen[l] != UINT32_MAX;
      auto r = rt.names.intern(e.rhs, e.rhs_hash);
      if (r == rt.seen.size())
        rt.seen.push_back(0);
      rt.seen[r] += rt.seen[r] != UINT32_MAX;
      if (auto ok = spill->push({l, r, e.rel, e.weight}); !ok)
        return ok;
    }
    queued = 0;
    return {};
  };

  bool header = opt_.skip_header;
  std::string_view block;
  for (;;) {
    auto more = reader->next_block(block);
    if (!more)
      return std::unexpected(more.error());
    if (!*more)
      break;
    while (!block.empty()) {
      auto line = take_line(block);
      ++line_number;
      if (header) {
        header = false;
        continue;
      }
      if (is_blank(line))
        continue;
      if ((++report_.lines & 0xffff) == 0)
        progress(phase, report_.lines, std::min(0.99, reader->fraction_read())); // 1.0 marks the end

      if (int got = opt_.split(line, fields); got < needed) {
        if (auto ok = malformed(line, fmt::format("{} column(s), need at least {}", got, needed)); !ok)
          return ok;
        continue;
      }
      auto field = [&](int col) { return fields[static_cast<std::size_t>(col)]; };
      auto empty = [&](int col) { return field(col).empty(); };
      if (empty(opt_.lhs_col) || empty(opt_.rhs_col) || (opt_.rel_col && empty(*opt_.rel_col)) ||
          (opt_.weight_col && empty(*opt_.weight_col))) {
        if (auto ok = malformed(line, "empty field"); !ok)
          return ok;
        continue;
      }
      std::uint32_t rel = 0;
      if (opt_.rel_col) {
        auto name = field(*opt_.rel_col);
        // Relation names are kept in entities.json: JSON holds UTF-8 only.
        if (cfg_.dynamic_relations && !is_utf8(name)) {
          if (auto ok = malformed(line, fmt::format("relation name '{}' is not valid UTF-8 (convert the file, e.g. "
                                                    "with iconv)",
                                                    excerpt(name)));
              !ok)
            return ok;
          continue;
        }
        rel = cfg_.dynamic_relations ? relations_.intern(name) : relations_.find(name);
        if (rel == name_table::npos) {
          if (auto ok = malformed(line, fmt::format("unknown relation '{}' (the config defines {} relation(s); set "
                                                    "dynamic_relations = true to take any name)",
                                                    excerpt(name), cfg_.relations.size()));
              !ok)
            return ok;
          continue;
        }
        if (rel == relation_seen_.size())
          relation_seen_.push_back(0);
      }
      float weight = 1.0f;
      if (opt_.weight_col) {
        auto text = field(*opt_.weight_col);
        auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), weight);
        if (ec != std::errc() || end != text.data() + text.size() || !std::isfinite(weight)) {
          if (auto ok = malformed(line, fmt::format("weight '{}' is not a finite number", excerpt(text))); !ok)
            return ok;
          continue;
        }
      }
      ++relation_seen_[rel];
      auto& e = batch[queued++];
      e = {field(opt_.lhs_col), field(opt_.rhs_col), name_table::hash(field(opt_.lhs_col)),
           name_table::hash(field(opt_.rhs_col)), rel, weight};
      lhs_type(rel).names.prefetch_slot(e.lhs_hash);
      rhs_type(rel).names.prefetch_slot(e.rhs_hash);
      if (queued == batch_size)
        if (auto ok = drain(); !ok)
          return ok;
    }
    if (auto ok = drain(); !ok) // the block's views end here
      return ok;
  }
  if (auto ok = spill->finish(); !ok)
    return ok;
  progress(phase, report_.lines, 1.0);
  if (file_malformed > 0)
    warn(fmt::format("{}: {} malformed line(s) skipped", input.string(), file_malformed));
  spills_.push_back(std::move(*spill));
  return {};
}

expected<void> importer::finalise_dictionaries() {
  // Relations: existing ids stay, new dynamic ones kept in first-seen order when frequent enough.
  relation_final_.assign(relations_.size(), dropped);
  std::vector<std::string> relation_names;
  for (std::uint32_t id = 0; id < relations_.size(); ++id) {
    bool keep = !cfg_.dynamic_relations || id < existing_relations_ ||
                relation_seen_[id] >= static_cast<std::uint64_t>(opt_.relation_type_min_count);
    if (keep) {
      relation_final_[id] = static_cast<std::uint32_t>(relation_names.size());
      relation_names.emplace_back(relations_.name(id));
    }
  }
  meta_.relation_names = std::move(relation_names);
  report_.relations = meta_.relation_names.size();

  for (auto& t : types_) {
    std::vector<std::uint32_t> fresh;
    for (auto id = t.existing; id < t.names.size(); ++id)
      if (t.seen[id] >= static_cast<std::uint64_t>(opt_.entity_min_count))
        fresh.push_back(id);
    t.partition.resize(t.names.size(), dropped);
    t.offset.resize(t.names.size(), dropped);
    std::mt19937_64 rng(shuffle_seed(cfg_, meta_.id, t.existing));
    std::shuffle(fresh.begin(), fresh.end(), rng);
    auto parts = static_cast<std::uint64_t>(t.num_partitions);
    const bool by_edges = t.existing == 0 && cfg_.partition_balance == "edges";
    const auto balanced = by_edges ? edge_balanced_partitions(fresh, t.seen, t.num_partitions) : std::vector<std::uint32_t>{};
    for (std::size_t i = 0; i < fresh.size(); ++i) {
      std::size_t p;
      if (by_edges) {
        p = balanced[i];
      } else if (t.existing == 0) {
        p = static_cast<std::size_t>(i * parts / fresh.size()); // PBG: contiguous slices of the shuffled names
      } else {
        p = static_cast<std::size_t>(std::min_element(t.counts.begin(), t.counts.end()) - t.counts.begin());
      }
      t.partition[fresh[i]] = static_cast<std::uint32_t>(p);
      t.offset[fresh[i]] = static_cast<std::uint32_t>(t.counts[p]++);
      t.changed.insert(static_cast<std::int64_t>(p));
    }
    if (t.existing == 0)
      for (std::int64_t p = 0; p < t.num_partitions; ++p)
        t.changed.insert(p); // a new type gets every names file, empty ones included
    report_.new_entities += fresh.size();
    report_.total_entities += t.existing + fresh.size();
    if (t.existing + fresh.size() > UINT32_MAX)
      return fail("entity type '{}' would hold more than 2^32 entities", t.name);
  }

  // Commit: names files first, then entities.json (see read_entity_names).
  for (auto& t : types_) {
    for (auto p : t.changed) {
      std::vector<std::string_view> names(static_cast<std::size_t>(t.counts[static_cast<std::size_t>(p)]));
      for (std::uint32_t id = 0; id < t.names.size(); ++id)
        if (t.partition[id] == static_cast<std::uint32_t>(p))
          names[t.offset[id]] = t.names.name(id);
      if (auto ok = storage::write_entity_names(entity_path_, meta_.id, t.name, p, names); !ok)
        return ok;
    }
    if (auto* old = const_cast<storage::entity_type_info*>(meta_.type(t.name)))
      old->counts = t.counts;
    else
      meta_.types.push_back({t.name, t.counts});
  }
  return storage::write_entity_meta(entity_path_, meta_);
}

expected<void> importer::write_edge_path(std::size_t index) {
  const auto& dir = edge_paths_[index];
  const auto& spill = spills_[index];
  auto phase = fmt::format("writing {}", dir.string());
  progress(phase, 0, 0.0);
  const auto buckets = static_cast<std::size_t>(lhs_partitions_ * rhs_partitions_);
  std::vector<std::uint64_t> sizes(buckets, 0);
  auto bucket_of = [&](const spill_record& e) -> std::size_t {
    auto rel = relation_final_[e.rel];
    if (rel == dropped)
      return buckets;
    auto& lt = lhs_type(e.rel);
    auto& rt = rhs_type(e.rel);
    auto lp = lt.partition[e.lhs], rp = rt.partition[e.rhs];
    if (lp == dropped || rp == dropped)
      return buckets;
    return lp * static_cast<std::size_t>(rhs_partitions_) + rp;
  };
  std::uint64_t dropped_edges = 0;
  if (auto ok = spill.for_each([&](const spill_record& e) {
        auto b = bucket_of(e);
        if (b == buckets)
          ++dropped_edges;
        else
          ++sizes[b];
      });
      !ok)
    return ok;
  report_.dropped_min_count += dropped_edges;

  storage::edge_manifest manifest;
  manifest.id = meta_.id;
  manifest.lhs_partitions = lhs_partitions_;
  manifest.rhs_partitions = rhs_partitions_;
  for (auto& t : types_)
    manifest.entity_types.push_back({t.name, t.counts});
  manifest.num_relations = meta_.relation_names.size();
  manifest.has_weights = opt_.weight_col.has_value();
  manifest.id_width = 4;
  manifest.sources.push_back(fs::absolute(opt_.inputs[index]).lexically_normal().string());

  // Bounded memory and open files: write at most 256 buckets per scan of the spill.
  constexpr std::size_t group = 256;
  std::uint64_t written = 0;
  for (std::size_t first = 0; first < buckets; first += group) {
    auto last = std::min(buckets, first + group);
    std::vector<std::optional<storage::bucket_writer>> writers(last - first);
    std::size_t open = 0;
    for (std::size_t b = first; b < last; ++b)
      open += sizes[b] > 0;
    auto buffer_edges = std::max<std::size_t>(1024, (32u << 20) / (16 * std::max<std::size_t>(open, 1)));
    for (std::size_t b = first; b < last; ++b) {
      if (sizes[b] == 0)
        continue;
      auto lhs = static_cast<std::int64_t>(b) / rhs_partitions_, rhs = static_cast<std::int64_t>(b) % rhs_partitions_;
      auto w = storage::bucket_writer::create(dir / storage::bucket_file_name(lhs, rhs), meta_.id,
                                              {sizes[b], 4, manifest.has_weights},
                                              std::min<std::size_t>(buffer_edges, sizes[b])); // no larger than the bucket
      if (!w)
        return std::unexpected(w.error());
      writers[b - first].emplace(std::move(*w));
    }
    expected<void> status;
    if (auto ok = spill.for_each([&](const spill_record& e) {
          auto b = bucket_of(e);
          if (b < first || b >= last || !status)
            return;
          auto& lt = lhs_type(e.rel);
          auto& rt = rhs_type(e.rel);
          status = writers[b - first]->append(lt.offset[e.lhs], rt.offset[e.rhs], relation_final_[e.rel], e.weight);
          if ((++written & 0xfffff) == 0)
            progress(phase, written, static_cast<double>(written) / static_cast<double>(spill.size()));
        });
        !ok)
      return ok;
    if (!status)
      return status;
    for (std::size_t b = first; b < last; ++b) {
      if (!writers[b - first])
        continue;
      auto sum = writers[b - first]->commit();
      if (!sum)
        return std::unexpected(sum.error());
      auto lhs = static_cast<std::int64_t>(b) / rhs_partitions_, rhs = static_cast<std::int64_t>(b) % rhs_partitions_;
      manifest.buckets.push_back({lhs, rhs, sizes[b], storage::bucket_file_name(lhs, rhs), *sum});
    }
  }
  if (auto ok = storage::fsync_directory(dir); !ok)
    return ok;
  if (auto ok = storage::write_edge_manifest(dir, manifest); !ok)
    return ok;
  // Bucket files of an earlier import that this one left empty are no longer part of the edge path.
  std::set<std::string> keep;
  for (auto& b : manifest.buckets)
    keep.insert(b.file);
  std::error_code ec;
  for (auto& entry : fs::directory_iterator(dir, ec)) {
    auto name = entry.path().filename().string();
    if (name.starts_with("edges_") && name.ends_with(".abgb") && !keep.contains(name))
      fs::remove(entry.path(), ec);
  }
  report_.edges += manifest.total_edges();
  report_.buckets += manifest.buckets.size();
  progress(phase, written, 1.0);
  return storage::fsync_directory(dir);
}

expected<import_report> importer::run() {
  if (auto ok = check_arguments(); !ok)
    return std::unexpected(ok.error());
  if (auto ok = open_entity_path(); !ok)
    return std::unexpected(ok.error());
  for (std::size_t i = 0; i < opt_.inputs.size(); ++i)
    if (auto ok = read_input(i); !ok)
      return std::unexpected(ok.error());
  if (auto ok = finalise_dictionaries(); !ok)
    return std::unexpected(ok.error());
  for (std::size_t i = 0; i < opt_.inputs.size(); ++i)
    if (auto ok = write_edge_path(i); !ok)
      return std::unexpected(ok.error());
  report_.seconds = clock_.seconds();
  return report_;
}

} // namespace

expected<import_report> run_import(const config& cfg, const import_options& options,
                                   const import_callbacks& callbacks) {
  return importer(cfg, options, callbacks).run();
}

} // namespace abg
