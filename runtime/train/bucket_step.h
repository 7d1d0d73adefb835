// One bucket of one iteration, as a trainer runs it on the tables it holds:
// hold out eval_fraction of the chunk's edges (the same ones every epoch),
// rank them, train the rest with the bucket kernel, rank them again (PBG's
// training-time evaluation). Torch and math only: no actors, no files beyond
// the bucket's edges, which the caller loads.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "abg/error.h"
#include "abg/eval/metrics.h"
#include "abg/model/kernel.h"
#include "runtime/train/plan.h"

namespace abg::train {

struct bucket_step_input {
  std::int64_t iteration = 0;
  schedule::bucket assigned{};
  std::uint64_t run_seed = 0;      // the run's seed: kernel shuffles and negatives
  std::uint64_t held_out_seed = 0; // the configured seed, else 0: stable across resumed runs
};

struct bucket_step_result {
  kernel_stats stats;
  std::int64_t chunk_edges = 0;         // the chunk's edges, held-out ones included
  std::vector<std::int64_t> held_out;   // their indices in the chunk, ascending
  std::optional<eval::metrics> before, after; // both set, or neither (nothing held out, or stopped)
  double eval_seconds = 0;
};

/// Fails when the config asks for GPUs this LibTorch cannot use.
expected<void> check_devices(const config& cfg);

/// PBG's "Stats" line: "loss: ... , pos_rank: ... , mrr: ... , r1: ... , r10: ... , r50: ... , auc: ... , count: N".
std::string pbg_stats(const eval::metrics& m);

/// Runs the bucket. `edges`: the bucket's chunk (load_edges); `log` gets PBG's
/// per-bucket lines (may be empty). Returns early, with what was done, once
/// `stop` is set.
expected<bucket_step_result> run_bucket_step(const plan& p, const bucket_step_input& in, bucket_tables& tables,
                                             model::shared_params& params, bucket_edges edges,
                                             const std::atomic<bool>& stop,
                                             const std::function<void(const std::string&)>& log);

} // namespace abg::train
