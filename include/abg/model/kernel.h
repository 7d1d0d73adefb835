// The bucket kernel: trains one bucket's edges on the loaded partition tables
// with HOGWILD worker threads. Pure: no actors, no files, no messages.
// Contract: docs/model.md.
#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

#include <torch/torch.h>

#include "abg/error.h"
#include "abg/model/model.h"

namespace abg::train {

/// Which implementation trains a batch (docs/model.md "Two kernel paths"):
/// automatic takes the fused CPU kernel whenever it covers the model and the
/// reference path otherwise; tests force one or the other.
enum class kernel_path { automatic, reference, fused };

struct kernel_options {
  std::int64_t workers = 1;      // HOGWILD threads (>= 1)
  std::int64_t batch_size = 1000;
  std::uint64_t seed = 0;        // shuffling, negative draws; workers = 1 is then reproducible
  std::int64_t num_gpus = 0;     // > 0 needs a CUDA build of LibTorch
  /// Overrides of the model's lr / relation_lr (nullopt: the model's).
  std::optional<double> lr, relation_lr;
  kernel_path path = kernel_path::automatic;
  /// all_negs: the most scores one thread holds at a time (the entity
  /// dimension is tiled to fit; a batch of B edges scores B·tile entities).
  std::int64_t score_tile_floats = std::int64_t{1} << 23;
};

struct kernel_stats {
  double loss = 0.0;       // sum of the batch losses
  std::int64_t edges = 0;  // edges trained (fewer than given when stopped)
  std::int64_t batches = 0;
  double seconds = 0.0;
  bool fused = false; // trained by the fused CPU kernel
};

/// A bucket's edges: int64 [E] lhs / rhs partition offsets and relation ids,
/// optional float weights [E] (undefined: 1).
struct bucket_edges {
  torch::Tensor lhs, rhs, rel, weight;
  std::int64_t size() const { return lhs.defined() ? lhs.size(0) : 0; }
};

/// The tables a bucket (i, j) reads, indexed by entity type: lhs[t] is type
/// t's table of partition i (or its only one), rhs[t] that of partition j.
/// Types no relation of the bucket uses may be left empty. The same tensors
/// may appear on both sides (e.g. bucket (0, 0)): updates then go to one table.
struct bucket_tables {
  std::vector<model::table> lhs, rhs;
};

/// Trains the edges once (shuffled, split among `workers` threads, batches of
/// one relation at a time without dynamic relations, relations chosen in
/// proportion to their remaining edges; mixed relation ids with dynamic
/// relations). Updates the tables and `params` in place (HOGWILD). Stops
/// early, between batches, once `stop` is true. Fails at once for
/// num_gpus > 0 without CUDA, path = fused on a model it does not cover,
/// out-of-range offsets or relation ids, or tables missing for a used type.
expected<kernel_stats> train_bucket(const model::model_desc& m, bucket_tables& tables, model::shared_params& params,
                                    const bucket_edges& edges, const kernel_options& options,
                                    const std::atomic<bool>& stop);

/// Same with one table per side (all relations between the same two types).
expected<kernel_stats> train_bucket(const model::model_desc& m, model::table& lhs, model::table& rhs,
                                    model::shared_params& params, const bucket_edges& edges,
                                    const kernel_options& options, const std::atomic<bool>& stop);

} // namespace abg::train
