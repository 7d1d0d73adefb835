// `abg train`: PBG's training loop (epoch -> edge path -> edge chunk ->
// buckets) run through the actor graph of runtime/cluster: one lock server,
// one coordinator and, per (simulated) machine, a trainer and a partition
// server, all in one process here.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "abg/config.h"
#include "abg/error.h"
#include "abg/eval/metrics.h"

namespace abg::cluster {

struct train_options {
  /// abg extension: seeds shuffling, negatives and initialisation; random
  /// (and printed) when absent. workers = 1 with a seed is reproducible.
  std::optional<std::uint64_t> seed;
  /// Set from a signal handler: the kernels stop at their next batch and the
  /// run returns; the interrupted iteration is not committed, so the last
  /// committed checkpoint stays the resume point and a new run redoes it.
  const std::atomic<bool>* stop = nullptr;
  /// Every request and reply between roles (coordinator, trainers, lock,
  /// partition and parameter servers) goes through CAF's binary serializer and back (tensors
  /// through the Cap'n Proto codec), as between machines (actors/wire_relay.h).
  /// For tests of the wire format in one process.
  bool over_the_wire = false;
};

struct iteration_report {
  std::int64_t epoch = 0, edge_path = 0, edge_chunk = 0;
  std::int64_t iteration = 0, iterations = 0;
  std::int64_t edges = 0, buckets = 0;
  double loss = 0;    // mean loss per edge
  double seconds = 0; // wall time of the iteration
  std::int64_t checkpoint_version = 0;
  /// eval_fraction > 0: the held-out edges of every bucket of the iteration,
  /// ranked before and after the bucket was trained (count 0 when none).
  eval::metrics eval_before, eval_after;
};

/// One bucket's held-out evaluation (eval_fraction > 0, at least one edge held out).
struct bucket_eval_report {
  std::int64_t epoch = 0, edge_path = 0, edge_chunk = 0, iteration = 0;
  std::int32_t lhs = 0, rhs = 0; // the bucket
  std::int64_t edges = 0;        // edges of the bucket's chunk
  std::int64_t trained = 0;      // edges given to the kernel (edges - held out)
  /// Indices of the held-out edges in the bucket's chunk, ascending; valid
  /// during the callback only.
  std::span<const std::int64_t> held_out;
  eval::metrics before, after;
  double eval_seconds = 0; // both evaluations
};

struct train_callbacks {
  std::function<void(std::string_view)> log;
  std::function<void(const iteration_report&)> iteration_done;
  /// Progress within an iteration: buckets done of total, edges so far, seconds.
  std::function<void(std::int64_t done, std::int64_t total, std::int64_t edges, double seconds)> bucket_done;
  /// After a bucket with held-out edges was trained and evaluated again.
  /// Called from the trainers' threads, one call at a time.
  std::function<void(const bucket_eval_report&)> bucket_evaluated;
};

struct train_summary {
  std::uint64_t seed = 0;
  std::int64_t iterations_run = 0;
  std::int64_t first_iteration = 0; // > 0 when resumed
  std::int64_t edges = 0;
  double seconds = 0;
  std::int64_t checkpoint_version = 0;
  bool stopped = false; // by options.stop
  /// early_stopping: the epoch (0-based) whose held-out loss rose above the
  /// previous epoch's, after which training stopped (also when a resumed run
  /// finds this in training_stats.json and trains nothing).
  std::optional<std::int64_t> early_stopped_epoch;
};

expected<train_summary> run_training(const config& cfg, std::string_view config_toml, const train_options& options,
                                     const train_callbacks& callbacks = {});

} // namespace abg::cluster
