// The training run: plans iterations (epoch, edge path, edge chunk), spawns
// the actor graph, and between iterations commits checkpoints. The math is
// abg::train::train_bucket, run by the trainers' kernels on their worker
// threads; the actors decide who trains which bucket and hold partitions.
#include "abg/cluster/train.h"

#include <chrono>
#include <cmath>
#include <fstream>
#include <thread>
#include <map>
#include <mutex>
#include <random>
#include <set>

#include <caf/all.hpp>

#include "abg/eval/model_score.h"
#include "abg/eval/sampled.h"
#include "abg/model/holdout.h"
#include "abg/model/kernel.h"
#include "abg/model/model.h"
#include "abg/storage/bucket_file.h"
#include "abg/storage/checkpoint.h"
#include "abg/storage/edge_manifest.h"
#include "abg/storage/entity_store.h"
#include "actors/interfaces.h"
#include "actors/wire_relay.h"
#include "messages/messages.h"
#include "runtime/cluster/early_stopping.h"
#include "runtime/cluster/param_sharing.h"

namespace abg::cluster {

namespace fs = std::filesystem;
using actors::bucket;
using msg::partition_chunk;
using msg::partition_key;

namespace {

using clock_type = std::chrono::steady_clock;

double seconds_since(clock_type::time_point start) {
  return std::chrono::duration<double>(clock_type::now() - start).count();
}

// Everything fixed for the whole run.
struct plan {
  const config* cfg = nullptr;
  storage::entity_store_meta meta;
  model::model_desc model;
  std::vector<storage::edge_manifest> manifests;
  std::vector<std::int64_t> type_partitions; // per model entity type
  std::set<std::size_t> lhs_types, rhs_types;
  int32_t nparts_lhs = 1, nparts_rhs = 1;
  bool shared_partitions = false;
  std::int64_t chunks = 1;
  std::int64_t iterations = 0;

  storage::checkpoint_position position(std::int64_t it) const {
    auto per_epoch = static_cast<std::int64_t>(cfg->edge_paths.size()) * chunks;
    auto in_epoch = it % per_epoch;
    return {it / per_epoch, in_epoch / chunks, in_epoch % chunks, in_epoch == per_epoch - 1};
  }
  std::int64_t iteration_of(const storage::checkpoint_position& p) const {
    return (p.epoch * static_cast<std::int64_t>(cfg->edge_paths.size()) + p.edge_path) * chunks + p.edge_chunk;
  }
  /// The partitions bucket b reads: (type index, partition).
  std::set<std::pair<std::size_t, std::int64_t>> partitions_of(bucket b) const {
    std::set<std::pair<std::size_t, std::int64_t>> out;
    for (auto t : lhs_types)
      out.emplace(t, type_partitions[t] > 1 ? b.lhs : 0);
    for (auto t : rhs_types)
      out.emplace(t, type_partitions[t] > 1 ? b.rhs : 0);
    return out;
  }
  partition_key key(std::size_t type, std::int64_t part) const {
    return {model.entity_types[type], static_cast<int32_t>(part)};
  }
  /// A partition of an entity type with one partition (PBG: unpartitioned).
  bool unpartitioned(const partition_key& k) const {
    for (std::size_t t = 0; t < model.entity_types.size(); ++t)
      if (model.entity_types[t] == k.entity)
        return type_partitions[t] == 1;
    return false;
  }
  std::int64_t count(std::size_t type, std::int64_t part) const {
    return meta.type(model.entity_types[type])->counts[static_cast<std::size_t>(part)];
  }
};

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
  for (auto t : p.lhs_types)
    p.nparts_lhs = std::max<int32_t>(p.nparts_lhs, static_cast<int32_t>(p.type_partitions[t]));
  for (auto t : p.rhs_types)
    p.nparts_rhs = std::max<int32_t>(p.nparts_rhs, static_cast<int32_t>(p.type_partitions[t]));
  // Partition k of either side is the same partition when one partitioned type plays both roles.
  std::set<std::size_t> lhs_parted, rhs_parted;
  for (auto t : p.lhs_types)
    if (p.type_partitions[t] > 1)
      lhs_parted.insert(t);
  for (auto t : p.rhs_types)
    if (p.type_partitions[t] > 1)
      rhs_parted.insert(t);
  p.shared_partitions = !lhs_parted.empty() && lhs_parted == rhs_parted;
  for (auto& path : cfg.edge_paths) {
    auto manifest = storage::read_edge_manifest(path);
    if (!manifest)
      return std::unexpected(manifest.error());
    if (manifest->id != p.meta.id)
      return fail("edge path {} was imported into dataset {}, but entity path {} is dataset {}; re-import it", path,
                  manifest->id.hex(), cfg.entity_path, p.meta.id.hex());
    if (manifest->lhs_partitions != p.nparts_lhs || manifest->rhs_partitions != p.nparts_rhs)
      return fail("edge path {} has a {}x{} bucket grid, the config implies {}x{}; re-run `abg import`", path,
                  manifest->lhs_partitions, manifest->rhs_partitions, p.nparts_lhs, p.nparts_rhs);
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
  p.iterations = cfg.num_epochs * static_cast<std::int64_t>(cfg.edge_paths.size()) * p.chunks;
  if (cfg.eval_fraction > 0 && cfg.eval_num_batch_negs.value_or(cfg.num_batch_negs) == 0 &&
      cfg.eval_num_uniform_negs.value_or(cfg.num_uniform_negs) == 0)
    return fail("eval_fraction = {} but evaluation has no negatives (eval_num_batch_negs = eval_num_uniform_negs = "
                "0); set one of them or eval_fraction = 0",
                cfg.eval_fraction);
  return p;
}

// Chunk `chunk` of `chunks` of a bucket file, as the kernel's int64 tensors.
expected<train::bucket_edges> load_edges(const plan& p, std::int64_t path, bucket b, std::int64_t chunk) {
  const auto& manifest = p.manifests[static_cast<std::size_t>(path)];
  train::bucket_edges edges;
  for (auto& mb : manifest.buckets) {
    if (mb.lhs != b.lhs || mb.rhs != b.rhs)
      continue;
    auto file = fs::path(p.cfg->edge_paths[static_cast<std::size_t>(path)]) / mb.file;
    auto reader = storage::bucket_reader::open(file, &p.meta.id);
    if (!reader)
      return std::unexpected(reader.error());
    if (reader->checksum() != mb.checksum || reader->size() != mb.edges)
      return fail("{} does not match its manifest; re-run `abg import`", file.string());
    auto n = static_cast<std::int64_t>(reader->size());
    auto begin = n * chunk / p.chunks, end = n * (chunk + 1) / p.chunks;
    auto k = end - begin;
    edges.lhs = torch::empty({k}, torch::kInt64);
    edges.rhs = torch::empty({k}, torch::kInt64);
    edges.rel = torch::empty({k}, torch::kInt64);
    auto* l = edges.lhs.data_ptr<std::int64_t>();
    auto* r = edges.rhs.data_ptr<std::int64_t>();
    auto* t = edges.rel.data_ptr<std::int64_t>();
    for (std::int64_t i = 0; i < k; ++i) {
      auto e = static_cast<std::uint64_t>(begin + i);
      l[i] = static_cast<std::int64_t>(reader->lhs(e));
      r[i] = static_cast<std::int64_t>(reader->rhs(e));
      t[i] = static_cast<std::int64_t>(reader->rel(e));
    }
    if (reader->layout().has_weights) {
      edges.weight = torch::empty({k}, torch::kFloat32);
      auto* w = edges.weight.data_ptr<float>();
      for (std::int64_t i = 0; i < k; ++i)
        w[i] = reader->weight(static_cast<std::uint64_t>(begin + i));
    }
  }
  if (!edges.lhs.defined()) { // empty bucket: no file
    edges.lhs = edges.rhs = edges.rel = torch::empty({0}, torch::kInt64);
  }
  return edges;
}

// Moving partitions between a trainer and the partition server, in row chunks
// well below Cap'n Proto's frame limit.
constexpr std::uint64_t chunk_bytes = 8u << 20;

expected<model::table> fetch_partition(caf::actor_system& sys, const actors::partition_server_actor& server,
                                       const partition_key& key) {
  caf::scoped_actor self{sys};
  // Chunks are copied straight into the table, allocated once the first
  // chunk gives its size (no growing buffers, no second copy).
  model::table t;
  std::int64_t dim = -1;
  std::uint64_t total = 1, next = 0;
  std::optional<error> failure;
  while (next < total && !failure) {
    std::uint64_t rows = dim > 0 ? std::max<std::uint64_t>(1, chunk_bytes / (4 * static_cast<std::uint64_t>(dim)))
                                 : std::max<std::uint64_t>(1, chunk_bytes / 4096);
    self->request(server, caf::infinite, msg::get_atom::value, key, next, rows)
      .receive(
        [&](partition_chunk& c) {
          const auto n = c.embeddings.shape.empty() ? 0 : c.embeddings.shape[0];
          const auto d = c.embeddings.shape.size() == 2 ? c.embeddings.shape[1] : 0;
          if (dim < 0) {
            total = c.total_rows;
            dim = d;
            t = model::allocate_table(static_cast<std::int64_t>(total), dim);
          }
          if (c.total_rows != total || d != dim || c.row_offset != next || next + static_cast<std::uint64_t>(n) > total ||
              c.embeddings.numel() != static_cast<std::size_t>(n * d) ||
              c.optim_state.numel() != static_cast<std::size_t>(n)) {
            failure = error{"partition server sent a chunk that does not fit the partition"};
            return;
          }
          std::copy(c.embeddings.data->begin(), c.embeddings.data->end(),
                    t.embeddings.data_ptr<float>() + next * static_cast<std::uint64_t>(dim));
          std::copy(c.optim_state.data->begin(), c.optim_state.data->end(), t.state.data_ptr<float>() + next);
          next += static_cast<std::uint64_t>(n);
          if (n == 0 && next < total)
            failure = error{"partition server sent an empty chunk"};
        },
        [&](caf::error& e) { failure = error{fmt::format("cannot get partition {}/{}: {}", key.entity, key.part,
                                                         sys.render(e))}; });
  }
  if (failure)
    return std::unexpected(*failure);
  return t; // the first reply (always at least one) allocated it
}

expected<void> store_partition(caf::actor_system& sys, const actors::partition_server_actor& server,
                               const partition_key& key, const model::table& t) {
  caf::scoped_actor self{sys};
  auto emb = t.embeddings.contiguous();
  auto state = t.state.contiguous();
  auto rows = static_cast<std::uint64_t>(emb.size(0));
  auto dim = static_cast<std::uint64_t>(emb.size(1));
  auto step = std::max<std::uint64_t>(1, chunk_bytes / (4 * std::max<std::uint64_t>(dim, 1)));
  const float* e = emb.data_ptr<float>();
  const float* s = state.data_ptr<float>();
  std::optional<error> failure;
  std::uint64_t first = 0;
  do {
    auto n = std::min(step, rows - first);
    partition_chunk c;
    c.key = key;
    c.row_offset = first;
    c.total_rows = rows;
    c.embeddings = msg::tensor::make({static_cast<std::int64_t>(n), static_cast<std::int64_t>(dim)},
                                     std::vector<float>(e + first * dim, e + (first + n) * dim));
    c.optim_state = msg::tensor::make({static_cast<std::int64_t>(n)}, std::vector<float>(s + first, s + first + n));
    self->request(server, caf::infinite, msg::put_atom::value, std::move(c))
      .receive([](bool) {},
               [&](caf::error& err) {
                 failure = error{fmt::format("cannot put partition {}/{}: {}", key.entity, key.part, sys.render(err))};
               });
    first += n;
  } while (first < rows && !failure);
  if (failure)
    return std::unexpected(*failure);
  return {};
}

// The partition servers of a run: partition k of every entity type lives on
// server k mod count, as PBG's PartitionClient places them.
struct partition_servers {
  std::vector<actors::partition_server_actor> all;
  const actors::partition_server_actor& of(const partition_key& k) const {
    return all[static_cast<std::size_t>(k.part) % all.size()];
  }
};

// What a trainer holds between buckets: the partitions of its last bucket,
// and with several machines every unpartitioned table it has used (shared
// through the parameter servers, never handed back during the run).
struct trainer_cache {
  std::map<partition_key, model::table> held;
};

// One trainer machine's shared parameters. With one machine, machine 0 alone
// and no parameter servers (as PBG); with several, each machine trains its
// own copy and its sharer exchanges it, and the unpartitioned tables it
// uses, through the parameter-server shards.
struct machine_state {
  model::shared_params params;
  std::unique_ptr<param_sharer> sharer;
};

// How often a machine's sharer exchanges in the background (PBG's sharer
// loops continuously; a bucket takes far longer than this).
constexpr std::chrono::milliseconds sharing_period{50};

std::string shared_table_name(const partition_key& k) { return fmt::format("table.{}", k.entity); }

// The tensors a machine shares: every shared parameter's storage (the stacks
// of relation parameters, not their row views), by a name all machines agree on.
std::vector<std::pair<std::string, torch::Tensor>> shared_tensors_of(const model::shared_params& params) {
  std::vector<std::pair<std::string, torch::Tensor>> out;
  for (const auto& [name, t] : params.values)
    if (!params.views.contains(name))
      out.emplace_back("param." + name, t);
  for (const auto& [key, t] : params.stacks)
    out.emplace_back("stack." + key, t);
  return out;
}

// State shared by the driver and the kernels (one process).
struct run_state {
  const plan* p = nullptr;
  caf::actor_system* sys = nullptr;
  const partition_servers* servers = nullptr; // owned by run_training
  std::vector<machine_state> machines;                    // by trainer id
  std::uint64_t seed = 0;
  std::uint64_t held_out_seed = 0; // the configured seed, else 0: stable across resumed runs
  std::atomic<std::int64_t> iteration{0};
  std::atomic<std::int64_t> buckets_done{0};
  std::atomic<std::int64_t> edges_done{0};
  clock_type::time_point iteration_start;
  const train_callbacks* callbacks = nullptr;
  const std::atomic<bool>* stop = nullptr;
  std::mutex report_mutex;
  std::optional<error> failure;
};

// PBG's Stats line: "loss: ... , pos_rank: ... , mrr: ... , r1: ... , r10: ... , r50: ... , auc: ... , count: N".
std::string pbg_stats(const eval::metrics& m) {
  return fmt::format("loss: {:.6g} , pos_rank: {:.6g} , mrr: {:.6g} , r1: {:.6g} , r10: {:.6g} , r50: {:.6g} , "
                     "auc: {:.6g} , count: {}",
                     m.loss(), m.mean_rank(), m.mrr(), m.hits_at_1(), m.hits_at_10(), m.hits_at_50(), m.auc(), m.count);
}

// The sampled ranking of a bucket's held-out edges as PBG's training-time
// evaluation does it: eval_num_batch_negs / eval_num_uniform_negs, batches of
// batch_size rounded up to a multiple of eval_num_batch_negs, split among the
// workers; on the bucket's tables and the current shared parameters.
expected<eval::sampled_result> evaluate_held_out(const plan& p, const model::shared_params& params,
                                                 const train::bucket_tables& tables, const train::bucket_edges& edges,
                                                 std::int64_t workers, std::uint64_t seed,
                                                 const std::atomic<bool>& stop) {
  const auto& cfg = *p.cfg;
  eval::sampled_options options;
  options.num_batch_negs = cfg.eval_num_batch_negs.value_or(cfg.num_batch_negs);
  options.num_uniform_negs = cfg.eval_num_uniform_negs.value_or(cfg.num_uniform_negs);
  options.batch_size = cfg.batch_size;
  if (options.num_batch_negs > 0) // PBG: round_up_to_nearest_multiple(batch_size, eval_num_batch_negs)
    options.batch_size = (cfg.batch_size + options.num_batch_negs - 1) / options.num_batch_negs * options.num_batch_negs;
  for (auto& r : p.model.relations)
    options.all_negs.push_back(r.all_negs);
  options.rank_lhs = !cfg.disable_lhs_negs;
  options.rank_rhs = !cfg.disable_rhs_negs;
  options.threads = static_cast<int>(workers);
  options.slices = static_cast<int>(workers);
  options.seed = seed;
  options.stop = &stop;
  // PBG's evaluation stats carry the loss too: each side's loss against the
  // evaluation negatives, times the relation's weight.
  options.loss = [&p](std::int64_t rel, const at::Tensor& pos, const at::Tensor& neg) {
    const auto& r = p.model.relations.at(static_cast<std::size_t>(rel));
    return r.weight * model::loss(p.model.loss, p.model.margin, pos, neg, {}).item<double>();
  };
  auto table = [&](std::int64_t rel, eval::side s) -> at::Tensor {
    const auto& r = p.model.relations.at(static_cast<std::size_t>(rel));
    return s == eval::side::lhs ? tables.lhs.at(static_cast<std::size_t>(r.lhs_type)).embeddings
                                : tables.rhs.at(static_cast<std::size_t>(r.rhs_type)).embeddings;
  };
  auto counts = [&](std::int64_t rel, eval::side s) { return table(rel, s).size(0); };
  const auto n = static_cast<std::size_t>(edges.size());
  eval::bucket_edges view{{edges.lhs.data_ptr<std::int64_t>(), n},
                          {edges.rhs.data_ptr<std::int64_t>(), n},
                          {edges.rel.data_ptr<std::int64_t>(), n}};
  return eval::sampled_rank_bucket(view, counts, eval::model_score(p.model, params, table),
                                   eval::model_pair_score(p.model, params, table), options);
}

actors::kernel_fn make_kernel(run_state& st, std::shared_ptr<trainer_cache> cache) {
  return [&st, cache](const actors::kernel_job& job, std::stop_token stop_token) -> msg::bucket_stats {
    const auto& p = *st.p;
    auto fail_with = [&](error e) -> msg::bucket_stats {
      std::lock_guard lock(st.report_mutex);
      if (!st.failure)
        st.failure = std::move(e);
      throw std::runtime_error(st.failure->message);
    };
    auto it = st.iteration.load();
    auto pos = p.position(it);
    // PBG's hogwild_delay: in the first epoch, trainers of machine rank > 0
    // wait this long before each bucket, so that rank 0 has started to move
    // the shared parameters away from their initial values. Rank 0, and every
    // trainer of a one-machine run, never waits. A stop ends the wait.
    if (pos.epoch == 0 && job.trainer > 0 && p.cfg->hogwild_delay > 0) {
      if (st.callbacks->log) {
        std::lock_guard lock(st.report_mutex);
        st.callbacks->log(fmt::format("trainer {} waits hogwild_delay = {} s before bucket ({}, {}) (first epoch)",
                                      job.trainer, p.cfg->hogwild_delay, job.assigned.lhs, job.assigned.rhs));
      }
      const auto until = clock_type::now() + std::chrono::duration<double>(p.cfg->hogwild_delay);
      while (clock_type::now() < until && !stop_token.stop_requested() && !(st.stop && st.stop->load()))
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    auto& machine = st.machines.at(job.trainer);
    // Swap: hand back what this bucket does not need, fetch what it lacks.
    // Shared (unpartitioned, several machines) tables stay: their sharer
    // keeps them current.
    auto needed = p.partitions_of(job.assigned);
    std::set<partition_key> needed_keys;
    for (auto [t, part] : needed)
      needed_keys.insert(p.key(t, part));
    for (auto i = cache->held.begin(); i != cache->held.end();) {
      if (needed_keys.contains(i->first) || (machine.sharer && p.unpartitioned(i->first))) {
        ++i;
        continue;
      }
      if (auto ok = store_partition(*st.sys, st.servers->of(i->first), i->first, i->second); !ok)
        return fail_with(ok.error());
      i = cache->held.erase(i);
    }
    for (auto& key : needed_keys) {
      if (cache->held.contains(key))
        continue;
      auto t = fetch_partition(*st.sys, st.servers->of(key), key);
      if (!t)
        return fail_with(t.error());
      // The partition server's copy may be older than the parameter servers'
      // value: the sharer's first exchange brings it up to date.
      if (machine.sharer && p.unpartitioned(key)) {
        machine.sharer->add(shared_table_name(key), t->embeddings);
        if (auto ok = machine.sharer->sync(); !ok)
          return fail_with(ok.error());
      }
      cache->held.emplace(key, std::move(*t));
    }
    train::bucket_tables tables;
    tables.lhs.resize(p.model.entity_types.size());
    tables.rhs.resize(p.model.entity_types.size());
    for (auto t : p.lhs_types)
      tables.lhs[t] = cache->held.at(p.key(t, p.type_partitions[t] > 1 ? job.assigned.lhs : 0));
    for (auto t : p.rhs_types)
      tables.rhs[t] = cache->held.at(p.key(t, p.type_partitions[t] > 1 ? job.assigned.rhs : 0));
    auto edges = load_edges(p, pos.edge_path, job.assigned, pos.edge_chunk);
    if (!edges)
      return fail_with(edges.error());
    // eval_fraction: the same edges of this (edge path, chunk, bucket) are
    // held out every epoch, evaluated before and after training the rest.
    const auto chunk_edges = edges->size();
    std::vector<std::int64_t> held_out;
    std::optional<train::held_out_split> split;
    if (train::num_held_out(chunk_edges, p.cfg->eval_fraction) > 0) {
      held_out = train::held_out_indices(chunk_edges, p.cfg->eval_fraction,
                                         train::held_out_seed(st.held_out_seed, pos.edge_path, pos.edge_chunk,
                                                              job.assigned.lhs, job.assigned.rhs));
      auto s = train::split_held_out(*edges, held_out);
      if (!s)
        return fail_with(s.error());
      split = std::move(*s);
      *edges = {};
    }
    const train::bucket_edges& train_edges = split ? split->train : *edges;
    train::kernel_options options;
    options.workers = p.cfg->workers.value_or(std::max<std::int64_t>(1, std::thread::hardware_concurrency()));
    options.batch_size = p.cfg->batch_size;
    options.num_gpus = p.cfg->num_gpus;
    options.seed = st.seed ^ (static_cast<std::uint64_t>(it) * 0x9e3779b97f4a7c15ULL) ^
                   (static_cast<std::uint64_t>(job.assigned.lhs) << 32) ^ static_cast<std::uint64_t>(job.assigned.rhs);
    std::atomic<bool> stop{false};
    std::stop_callback on_stop(stop_token, [&] { stop = true; });
    std::jthread signal_watch([&](std::stop_token local) {
      while (!local.stop_requested() && !stop) {
        if (st.stop && st.stop->load())
          stop = true;
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    });
    // The watch polls every 20 ms; each phase also looks at the flag when it starts.
    auto poll_stop = [&] {
      if (st.stop && st.stop->load())
        stop = true;
    };
    const auto label = fmt::format("epoch {} edge path {} chunk {} bucket ({}, {})", pos.epoch, pos.edge_path,
                                   pos.edge_chunk, job.assigned.lhs, job.assigned.rhs);
    auto log = [&](std::string line) {
      if (st.callbacks->log) {
        std::lock_guard lock(st.report_mutex);
        st.callbacks->log(fmt::format("{}: {}", label, line));
      }
    };
    // Same negatives before and after: the two rankings differ only by the training in between.
    const auto eval_seed = options.seed ^ 0x5bd1e9955bd1e995ULL;
    double eval_seconds = 0;
    std::optional<eval::sampled_result> before, after;
    if (split) {
      poll_stop();
      auto t0 = clock_type::now();
      auto r = evaluate_held_out(p, machine.params, tables, split->held_out, options.workers, eval_seed, stop);
      if (!r)
        return fail_with(r.error());
      eval_seconds += seconds_since(t0);
      if (!r->stopped) {
        before = std::move(*r);
        log("Stats before training: " + pbg_stats(before->stats.overall));
      }
    }
    poll_stop();
    auto stats = train::train_bucket(p.model, tables, machine.params, train_edges, options, stop);
    if (!stats)
      return fail_with(stats.error());
    poll_stop();
    if (before && !stop) {
      auto t0 = clock_type::now();
      auto r = evaluate_held_out(p, machine.params, tables, split->held_out, options.workers, eval_seed, stop);
      if (!r)
        return fail_with(r.error());
      eval_seconds += seconds_since(t0);
      if (!r->stopped)
        after = std::move(*r);
    }
    signal_watch.request_stop();
    if (after) {
      const auto& b = before->stats.overall;
      const auto& a = after->stats.overall;
      log("Stats after training: " + pbg_stats(a));
      log(fmt::format("Trained {} edges in {:.2f} s ({:.2g} M/sec); Eval 2*{} edges in {:.2f} s ({:.2g} M/sec)",
                      stats->edges, stats->seconds,
                      stats->seconds > 0 ? static_cast<double>(stats->edges) / stats->seconds / 1e6 : 0.0,
                      held_out.size(), eval_seconds,
                      eval_seconds > 0 ? 2.0 * static_cast<double>(held_out.size()) / eval_seconds / 1e6 : 0.0));
      std::lock_guard lock(st.report_mutex);
      if (st.callbacks->bucket_evaluated) {
        bucket_eval_report report;
        report.epoch = pos.epoch;
        report.edge_path = pos.edge_path;
        report.edge_chunk = pos.edge_chunk;
        report.iteration = it;
        report.lhs = job.assigned.lhs;
        report.rhs = job.assigned.rhs;
        report.edges = chunk_edges;
        report.trained = train_edges.size();
        report.held_out = held_out;
        report.before = b;
        report.after = a;
        report.eval_seconds = eval_seconds;
        st.callbacks->bucket_evaluated(report);
      }
    }
    msg::bucket_stats out;
    out.trainer = job.trainer;
    out.epoch = job.epoch;
    out.trained = job.assigned;
    out.edges = stats->edges;
    out.loss = stats->loss;
    out.seconds = stats->seconds;
    if (after) {
      out.eval_before = before->stats.overall;
      out.eval_after = after->stats.overall;
    }
    auto done = ++st.buckets_done;
    auto edges_so_far = st.edges_done += stats->edges;
    if (st.callbacks->bucket_done) {
      std::lock_guard lock(st.report_mutex);
      st.callbacks->bucket_done(done, static_cast<std::int64_t>(p.nparts_lhs) * p.nparts_rhs, edges_so_far,
                                seconds_since(st.iteration_start));
    }
    return out;
  };
}

// Initial tables and shared parameters: the newest committed checkpoint of
// checkpoint_path (resume), else init_path's, else fresh.
struct start_point {
  std::map<partition_key, model::table> tables;
  model::shared_params params;
  std::int64_t first_iteration = 0;
  std::int64_t next_version = 1;
};

expected<start_point> load_start(const plan& p, std::uint64_t seed, const train_callbacks& cb) {
  start_point s;
  s.params = model::shared_params::init(p.model);
  const auto& cfg = *p.cfg;
  auto schema = storage::checkpoint_schema(cfg);
  std::optional<storage::checkpoint_reader> reader;
  bool resume = false;
  if (!storage::committed_checkpoint_versions(cfg.checkpoint_path).empty()) {
    auto r = storage::checkpoint_reader::open(cfg.checkpoint_path, p.meta.id);
    if (!r)
      return std::unexpected(r.error());
    reader.emplace(std::move(*r));
    resume = true;
  } else if (cfg.init_path) {
    auto r = storage::checkpoint_reader::open(*cfg.init_path, p.meta.id);
    if (!r)
      return std::unexpected(r.error());
    reader.emplace(std::move(*r));
  }
  if (reader) {
    if (auto ok = reader->check_schema(schema); !ok && resume)
      return fail("{} holds a checkpoint of another model: {}", cfg.checkpoint_path, ok.error().message);
    auto shared = reader->shared();
    if (!shared)
      return std::unexpected(shared.error());
    // init_path may predate an import that added dynamic relation types:
    // those start at their initial values.
    auto loaded = s.params.load(*shared, !resume && p.model.dynamic);
    if (!loaded)
      return resume ? std::unexpected(loaded.error())
                    : fail("init_path {}: {} (init_path must hold the same model: same relations and operators)",
                           *cfg.init_path, loaded.error().message);
    if (*loaded > 0 && cb.log)
      cb.log(fmt::format("{} relation type(s) added since init_path start with fresh parameters", *loaded));
    if (resume) {
      s.first_iteration = p.iteration_of(reader->manifest().position) + 1;
      s.next_version = reader->version() + 1;
      if (cb.log)
        cb.log(fmt::format("resuming from checkpoint version {} ({} of {} iterations done)", reader->version(),
                           s.first_iteration, p.iterations));
    } else if (cb.log) {
      cb.log(fmt::format("starting from init_path {} (version {})", *cfg.init_path, reader->version()));
    }
  }
  std::uint64_t table_seed = seed;
  for (std::size_t t = 0; t < p.model.entity_types.size(); ++t) {
    for (std::int64_t part = 0; part < p.type_partitions[t]; ++part) {
      auto count = p.count(t, part);
      auto dim = p.model.dims[t];
      auto table = model::init_table(count, dim, p.model.init_scale, ++table_seed);
      if (reader) {
        if (auto* ct = reader->manifest().table(p.model.entity_types[t], part)) {
          auto old = reader->embeddings(p.model.entity_types[t], part);
          auto state = reader->optimizer(p.model.entity_types[t], part);
          if (!old || !state)
            return std::unexpected(!old ? old.error() : state.error());
          auto old_rows = old->shape.empty() ? 0 : old->shape[0];
          if (old_rows > count || (old->shape.size() == 2 && old->shape[1] != dim))
            return fail("checkpoint table {}/{} has shape [{}] but the entity path holds {} rows of dimension {}",
                        p.model.entity_types[t], part, fmt::join(old->shape, ", "), count, dim);
          // Entities added by a later import (appended, ids never move) keep their fresh init.
          auto rows = torch::from_blob(old->data.data(), {old_rows, dim}, torch::kFloat32);
          table.embeddings.narrow(0, 0, old_rows).copy_(rows);
          table.state.narrow(0, 0, old_rows)
            .copy_(torch::from_blob(state->data.data(), {old_rows}, torch::kFloat32));
          (void)ct;
        }
      }
      s.tables.emplace(p.key(t, part), std::move(table));
    }
  }
  return s;
}

expected<void> write_checkpoint(const plan& p, std::string_view config_toml,
                                const std::map<partition_key, model::table>& tables,
                                const model::shared_params& params, std::int64_t version,
                                const storage::checkpoint_position& pos, const nlohmann::json& stats) {
  auto settings = storage::checkpoint_settings::from(*p.cfg, p.meta.id, std::string(config_toml));
  auto w = storage::checkpoint_writer::begin(p.cfg->checkpoint_path, version, std::move(settings));
  if (!w)
    return std::unexpected(w.error());
  for (auto& [key, t] : tables) {
    auto emb = t.embeddings.contiguous();
    auto state = t.state.contiguous();
    if (auto ok = w->put_embeddings(key.entity, key.part,
                                    std::span<const float>(emb.data_ptr<float>(), static_cast<std::size_t>(emb.numel())),
                                    emb.size(0), emb.size(1));
        !ok)
      return ok;
    if (auto ok = w->put_optimizer(key.entity, key.part,
                                   std::span<const float>(state.data_ptr<float>(), static_cast<std::size_t>(state.numel())));
        !ok)
      return ok;
  }
  auto shared = params.to_checkpoint();
  for (auto& e : shared.entries)
    if (auto ok = w->put_shared(e.name, e.shape, shared.values(e)); !ok)
      return ok;
  auto committed = w->commit(pos, stats);
  if (!committed)
    return std::unexpected(committed.error());
  return {};
}

} // namespace

expected<train_summary> run_training(const config& cfg, std::string_view config_toml, const train_options& options,
                                     const train_callbacks& callbacks) {
  auto start = clock_type::now();
  if (cfg.num_gpus > 0 && !torch::cuda::is_available())
    return fail("num_gpus = {} but this LibTorch has no CUDA (or no GPU is visible); set num_gpus = 0", cfg.num_gpus);
  auto p = make_plan(cfg);
  if (!p)
    return std::unexpected(p.error());
  train_summary summary;
  summary.seed = options.seed ? *options.seed : std::random_device{}() * 0x100000001ULL ^ std::random_device{}();
  auto begin = load_start(*p, summary.seed, callbacks);
  if (!begin)
    return std::unexpected(begin.error());
  summary.first_iteration = begin->first_iteration;
  summary.checkpoint_version = begin->next_version - 1; // what a run stopped before its first commit leaves
  // early_stopping compares whole epochs of held-out loss; a resumed run
  // first replays the committed ones.
  std::optional<early_stopping> stopping;
  if (cfg.early_stopping && cfg.eval_fraction > 0) {
    stopping.emplace();
    const auto paths = static_cast<std::int64_t>(cfg.edge_paths.size());
    auto replayed = stopping->replay(fs::path(cfg.checkpoint_path) / "training_stats.json", begin->first_iteration,
                                     [&](std::int64_t epoch, std::int64_t path, std::int64_t chunk) -> std::int64_t {
                                       if (path < 0 || path >= paths || chunk < 0 || chunk >= p->chunks)
                                         return -1;
                                       return p->iteration_of({epoch, path, chunk, false});
                                     });
    if (!replayed)
      return std::unexpected(replayed.error());
    if (auto r = stopping->first_rise(begin->first_iteration / (paths * p->chunks))) {
      if (callbacks.log)
        callbacks.log(fmt::format("early_stopping: this run already stopped after epoch {} (held-out loss {:.6g}, "
                                  "up from {:.6g}); nothing to train",
                                  r->epoch + 1, r->loss, r->previous));
      summary.early_stopped_epoch = r->epoch;
      return summary;
    }
  }
  if (begin->first_iteration >= p->iterations) {
    if (callbacks.log)
      callbacks.log("every iteration of this config is already in the checkpoint; nothing to train");
    summary.checkpoint_version = begin->next_version - 1;
    return summary;
  }

  caf::actor_system_config sys_cfg;
  msg::register_message_types(sys_cfg);
  sys_cfg.set("scheduler.max-threads", 2);
  sys_cfg.set("logger.console", caf::atom("none"));
  // Declared before the actor system: the trainers' kernels use it until the
  // system has joined them.
  run_state st;
  caf::actor_system sys{sys_cfg};
  // Every way out of here, errors included, first stops the sharers (their
  // loops talk to the parameter servers), then every actor spawned here,
  // newest first, and waits until they are gone (a trainer joins its kernel,
  // which uses the servers below, before it is).
  partition_servers servers;
  std::vector<actors::parameter_server_actor> param_servers;
  std::vector<caf::actor> spawned;
  auto track = [&spawned](auto handle) {
    spawned.push_back(caf::actor_cast<caf::actor>(handle));
    return handle;
  };
  struct shutdown_guard {
    std::function<void()> run;
    ~shutdown_guard() { run(); }
  } shutdown{[&] {
    for (auto& m : st.machines)
      m.sharer.reset();
    for (auto a = spawned.rbegin(); a != spawned.rend(); ++a)
      caf::anon_send_exit(*a, caf::exit_reason::user_shutdown);
    caf::scoped_actor waiter{sys};
    waiter->wait_for(spawned);
  }};
  st.p = &*p;
  st.sys = &sys;
  st.seed = summary.seed;
  st.held_out_seed = options.seed.value_or(0);
  // Trainer machines: one keeps the parameters to itself; several share them
  // (and the unpartitioned tables) through one parameter-server shard each.
  st.machines.resize(static_cast<std::size_t>(cfg.num_machines));
  if (cfg.num_machines > 1) {
    for (std::int64_t m = 0; m < cfg.num_machines; ++m)
      param_servers.push_back(track(actors::spawn_parameter_server(sys, fmt::format("parameter server {}", m))));
    if (options.over_the_wire)
      for (auto& ps : param_servers)
        ps = track(actors::spawn_wire_relay(sys, ps));
    const auto shared = shared_tensors_of(begin->params);
    for (auto& [name, t] : shared)
      if (auto ok = param_sharer::initialise(sys, param_servers, name, t); !ok)
        return std::unexpected(ok.error());
    for (auto& [key, t] : begin->tables)
      if (p->unpartitioned(key))
        if (auto ok = param_sharer::initialise(sys, param_servers, shared_table_name(key), t.embeddings); !ok)
          return std::unexpected(ok.error());
    if (callbacks.log) {
      std::int64_t values = 0, tables = 0;
      for (auto& [name, t] : shared)
        values += t.numel();
      for (auto& [key, t] : begin->tables)
        tables += p->unpartitioned(key);
      callbacks.log(fmt::format("{} machines share {} parameter value(s) and {} unpartitioned table(s) through {} "
                                "parameter server(s)",
                                cfg.num_machines, values, tables, param_servers.size()));
    }
    for (std::int64_t m = 0; m < cfg.num_machines; ++m) {
      auto& machine = st.machines[static_cast<std::size_t>(m)];
      machine.params = m == 0 ? begin->params : begin->params.clone();
      machine.sharer = std::make_unique<param_sharer>(sys, param_servers);
      for (auto& [name, t] : shared_tensors_of(machine.params))
        machine.sharer->add(name, t);
      machine.sharer->start(sharing_period);
    }
  } else {
    st.machines[0].params = std::move(begin->params);
  }
  st.callbacks = &callbacks;
  st.stop = options.stop;
  // over_the_wire: the trainers reach the servers through wire relays
  // (every message serialized and deserialized, as between machines); the
  // relays are linked to the servers, so stopping a relay stops its server.
  // num_partition_servers as PBG: -1 one per machine, > 0 that many; 0
  // (PBG: swap through the checkpoint directory) one, in memory.
  const auto num_servers = cfg.num_partition_servers < 0 ? cfg.num_machines : std::max<std::int64_t>(1, cfg.num_partition_servers);
  for (std::int64_t k = 0; k < num_servers; ++k) {
    auto server = track(actors::spawn_partition_server(sys, fmt::format("partition server {}", k)));
    servers.all.push_back(options.over_the_wire ? track(actors::spawn_wire_relay(sys, server)) : server);
  }
  st.servers = &servers;
  for (auto& [key, t] : begin->tables)
    if (auto ok = store_partition(sys, servers.of(key), key, t); !ok)
      return std::unexpected(ok.error());
  begin->tables.clear();

  actors::scheduler_config sc;
  sc.nparts_lhs = p->nparts_lhs;
  sc.nparts_rhs = p->nparts_rhs;
  auto order = actors::parse_bucket_order(cfg.bucket_order);
  sc.order = order.value_or(actors::bucket_order::inside_out);
  sc.seed = summary.seed;
  sc.shared_partitions = p->shared_partitions;
  sc.num_trainers = static_cast<int32_t>(cfg.num_machines);
  sc.tree_init_order = cfg.distributed_tree_init_order;
  sc.first_epoch = 0;
  auto lock = track(actors::spawn_lock_server(sys, sc));
  if (options.over_the_wire)
    lock = track(actors::spawn_wire_relay(sys, lock));
  std::vector<std::shared_ptr<trainer_cache>> caches;
  std::vector<actors::trainer_actor> trainers;
  for (std::int64_t m = 0; m < cfg.num_machines; ++m) {
    caches.push_back(std::make_shared<trainer_cache>());
    trainers.push_back(
      track(actors::spawn_trainer(sys, static_cast<uint32_t>(m), lock, make_kernel(st, caches.back()))));
    if (options.over_the_wire)
      trainers.back() = track(actors::spawn_wire_relay(sys, trainers.back()));
  }
  auto coordinator = track(actors::spawn_coordinator(sys, lock, trainers));
  if (options.over_the_wire)
    coordinator = track(actors::spawn_wire_relay(sys, coordinator));
  caf::scoped_actor self{sys};
  auto version = begin->next_version;
  for (auto it = begin->first_iteration; it < p->iterations; ++it) {
    auto pos = p->position(it);
    st.iteration = it;
    st.buckets_done = 0;
    st.edges_done = 0;
    st.iteration_start = clock_type::now();
    std::optional<msg::epoch_stats> stats;
    std::optional<error> failure;
    // A plain send: the reply arrives as a message, so the wait can also
    // notice a kernel that failed (its trainer is gone, the epoch would never end).
    self->send(coordinator, msg::run_epochs_atom::value, static_cast<int32_t>(it), int32_t{1});
    while (!stats && !failure && !st.failure)
      self->receive([&](std::vector<msg::epoch_stats>& s) { stats = s.empty() ? msg::epoch_stats{} : s.front(); },
                    [&](caf::error& e) { failure = error{sys.render(e)}; },
                    caf::after(std::chrono::milliseconds(100)) >> [] {});
    if (st.failure)
      return std::unexpected(*st.failure);
    if (failure)
      return fail("training iteration {} failed: {}", it, failure->message);
    // Several machines: two exchange rounds each, with the trainers idle,
    // leave every machine's copy equal to the parameter servers' sums.
    for (int round = 0; round < 2 && st.machines.size() > 1; ++round)
      for (auto& m : st.machines)
        if (auto ok = m.sharer->sync(); !ok)
          return std::unexpected(ok.error());
    // Checkpoint every partition: those a trainer holds from its cache, the
    // others from the partition server. With several trainers the held ones
    // go back to the server first, so the next iteration's lock server sees
    // every partition free; a single trainer keeps its partitions (no copies).
    std::map<partition_key, model::table> tables;
    // Shared tables stay with their trainers; the first machine holding one
    // gives its row-wise Adagrad state (PBG checkpoints rank 0's optimizer).
    for (auto& c : caches) {
      for (auto& [key, t] : c->held) {
        if (caches.size() > 1 && !p->unpartitioned(key))
          if (auto ok = store_partition(sys, servers.of(key), key, t); !ok)
            return std::unexpected(ok.error());
        tables.emplace(key, t);
      }
      if (caches.size() > 1)
        std::erase_if(c->held, [&](const auto& kv) { return !p->unpartitioned(kv.first); });
    }
    for (std::size_t t = 0; t < p->model.entity_types.size(); ++t)
      for (std::int64_t part = 0; part < p->type_partitions[t]; ++part) {
        if (tables.contains(p->key(t, part)))
          continue;
        auto table = fetch_partition(sys, servers.of(p->key(t, part)), p->key(t, part));
        if (!table)
          return std::unexpected(table.error());
        tables.emplace(p->key(t, part), std::move(*table));
      }
    bool stopped = options.stop && options.stop->load();
    iteration_report report;
    report.epoch = pos.epoch;
    report.edge_path = pos.edge_path;
    report.edge_chunk = pos.edge_chunk;
    report.iteration = it;
    report.iterations = p->iterations;
    report.edges = stats->edges;
    report.buckets = stats->buckets;
    report.loss = stats->edges > 0 ? stats->loss / static_cast<double>(stats->edges) : 0.0;
    report.seconds = seconds_since(st.iteration_start);
    // The held-out evaluation of the iteration: its buckets' reports together.
    for (const auto& b : stats->per_bucket) {
      report.eval_before.merge(b.eval_before);
      report.eval_after.merge(b.eval_after);
    }
    if (stopped) { // a partial iteration: keep the last committed version as the resume point
      summary.stopped = true;
      summary.edges += stats->edges;
      break;
    }
    nlohmann::json json_stats = {{"epoch", pos.epoch},     {"edge_path", pos.edge_path}, {"edge_chunk", pos.edge_chunk},
                                 {"edges", stats->edges},  {"loss", report.loss},        {"seconds", report.seconds},
                                 {"seed", summary.seed}};
    // PBG writes the held-out evaluation there too: the iteration's buckets together.
    if (report.eval_before.count > 0) {
      json_stats["eval_stats_before"] = report.eval_before.to_json();
      json_stats["eval_stats_after"] = report.eval_after.to_json();
    }
    if (auto ok = write_checkpoint(*p, config_toml, tables, st.machines[0].params, version, pos, json_stats); !ok)
      return std::unexpected(ok.error());
    // training_stats.json: one JSON object per line, as PBG writes it.
    {
      std::ofstream out(fs::path(cfg.checkpoint_path) / "training_stats.json", std::ios::app);
      out << json_stats.dump() << "\n";
    }
    report.checkpoint_version = version;
    summary.checkpoint_version = version++;
    summary.edges += stats->edges;
    ++summary.iterations_run;
    if (callbacks.iteration_done)
      callbacks.iteration_done(report);
    if (stopping) {
      stopping->add(pos.epoch, report.eval_after);
      if (auto r = pos.epoch_complete ? stopping->first_rise(pos.epoch + 1) : std::nullopt) {
        if (callbacks.log)
          callbacks.log(fmt::format("early_stopping: held-out loss {:.6g} after epoch {}, up from {:.6g}; training "
                                    "stops here",
                                    r->loss, r->epoch + 1, r->previous));
        summary.early_stopped_epoch = r->epoch;
        break;
      }
    }
  }
  summary.seconds = seconds_since(start);
  return summary;
}

} // namespace abg::cluster
