#include "runtime/train/bucket_step.h"

#include <chrono>
#include <thread>

#include "abg/eval/model_score.h"
#include "abg/eval/sampled.h"
#include "abg/model/holdout.h"

namespace abg::train {
namespace {

using clock_type = std::chrono::steady_clock;

double seconds_since(clock_type::time_point start) {
  return std::chrono::duration<double>(clock_type::now() - start).count();
}

// The sampled ranking of a bucket's held-out edges as PBG's training-time
// evaluation does it: eval_num_batch_negs / eval_num_uniform_negs, batches of
// batch_size rounded up to a multiple of eval_num_batch_negs, split among the
// workers; on the bucket's tables and the current shared parameters.
expected<eval::sampled_result> evaluate_held_out(const plan& p, const model::shared_params& params,
                                                 const bucket_tables& tables, const bucket_edges& edges,
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
  return eval::sampled_rank_bucket(view, counts, eval::model_score(p.model, params, eval::rows_of(table)),
                                   eval::model_pair_score(p.model, params, eval::rows_of(table)), options);
}

} // namespace

expected<void> check_devices(const config& cfg) {
  if (cfg.num_gpus > 0 && !torch::cuda::is_available())
    return fail("num_gpus = {} but this LibTorch has no CUDA (or no GPU is visible); set num_gpus = 0", cfg.num_gpus);
  return {};
}

std::string pbg_stats(const eval::metrics& m) {
  return fmt::format("loss: {:.6g} , pos_rank: {:.6g} , mrr: {:.6g} , r1: {:.6g} , r10: {:.6g} , r50: {:.6g} , "
                     "auc: {:.6g} , count: {}",
                     m.loss(), m.mean_rank(), m.mrr(), m.hits_at_1(), m.hits_at_10(), m.hits_at_50(), m.auc(), m.count);
}

expected<bucket_step_result> run_bucket_step(const plan& p, const bucket_step_input& in, bucket_tables& tables,
                                             model::shared_params& params, bucket_edges edges,
                                             const std::atomic<bool>& stop,
                                             const std::function<void(const std::string&)>& log) {
  const auto pos = p.position(in.iteration);
  bucket_step_result out;
  out.chunk_edges = edges.size();
  // eval_fraction: the same edges of this (edge path, chunk, bucket) are
  // held out every epoch, evaluated before and after training the rest.
  std::optional<held_out_split> split;
  if (num_held_out(out.chunk_edges, p.cfg->eval_fraction) > 0) {
    out.held_out = held_out_indices(out.chunk_edges, p.cfg->eval_fraction,
                                    held_out_seed(in.held_out_seed, pos.edge_path, pos.edge_chunk, in.assigned.lhs,
                                                  in.assigned.rhs));
    auto s = split_held_out(edges, out.held_out);
    if (!s)
      return std::unexpected(s.error());
    split = std::move(*s);
    edges = {};
  }
  const bucket_edges& train_edges = split ? split->train : edges;
  kernel_options options;
  options.workers = p.cfg->workers.value_or(std::max<std::int64_t>(1, std::thread::hardware_concurrency()));
  options.batch_size = p.cfg->batch_size;
  options.num_gpus = p.cfg->num_gpus;
  options.seed = in.run_seed ^ (static_cast<std::uint64_t>(in.iteration) * 0x9e3779b97f4a7c15ULL) ^
                 (static_cast<std::uint64_t>(in.assigned.lhs) << 32) ^ static_cast<std::uint64_t>(in.assigned.rhs);
  const auto label = fmt::format("epoch {} edge path {} chunk {} bucket ({}, {})", pos.epoch, pos.edge_path,
                                 pos.edge_chunk, in.assigned.lhs, in.assigned.rhs);
  auto say = [&](const std::string& line) {
    if (log)
      log(fmt::format("{}: {}", label, line));
  };
  // Same negatives before and after: the two rankings differ only by the training in between.
  const auto eval_seed = options.seed ^ 0x5bd1e9955bd1e995ULL;
  std::optional<eval::sampled_result> before, after;
  if (split && !stop) {
    auto t0 = clock_type::now();
    auto r = evaluate_held_out(p, params, tables, split->held_out, options.workers, eval_seed, stop);
    if (!r)
      return std::unexpected(r.error());
    out.eval_seconds += seconds_since(t0);
    if (!r->stopped) {
      before = std::move(*r);
      say("Stats before training: " + pbg_stats(before->stats.overall));
    }
  }
  if (stop)
    return out;
  auto stats = train_bucket(p.model, tables, params, train_edges, options, stop);
  if (!stats)
    return std::unexpected(stats.error());
  out.stats = *stats;
  if (before && !stop) {
    auto t0 = clock_type::now();
    auto r = evaluate_held_out(p, params, tables, split->held_out, options.workers, eval_seed, stop);
    if (!r)
      return std::unexpected(r.error());
    out.eval_seconds += seconds_since(t0);
    if (!r->stopped)
      after = std::move(*r);
  }
  if (after) {
    out.before = before->stats.overall;
    out.after = after->stats.overall;
    say("Stats after training: " + pbg_stats(*out.after));
    say(fmt::format("Trained {} edges in {:.2f} s ({:.2g} M/sec); Eval 2*{} edges in {:.2f} s ({:.2g} M/sec)",
                    stats->edges, stats->seconds,
                    stats->seconds > 0 ? static_cast<double>(stats->edges) / stats->seconds / 1e6 : 0.0,
                    out.held_out.size(), out.eval_seconds,
                    out.eval_seconds > 0 ? 2.0 * static_cast<double>(out.held_out.size()) / out.eval_seconds / 1e6
                                         : 0.0));
  }
  return out;
}

} // namespace abg::train
