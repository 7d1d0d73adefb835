// Sampled ranking as PBG's torchbiggraph_eval: per chunk of num_batch_negs
// edges, the negatives of a side are the chunk's own entities on that side
// (the true pair masked, the last chunk padded with masked columns) followed by
// num_uniform_negs uniform draws from the bucket's partition; relations with
// all_negs rank against every entity of the partition instead.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <random>
#include <span>
#include <vector>

#include "abg/eval/metrics.h"
#include "abg/eval/ranking.h"
#include "abg/storage/bucket_file.h"

namespace abg::eval {

/// The edges of one bucket: offsets in the bucket's lhs / rhs partitions.
struct bucket_edges {
  std::span<const std::int64_t> lhs, rhs, rel;
};

/// A bucket file's columns, copied out (what bucket_edges views).
struct bucket_columns {
  std::vector<std::int64_t> lhs, rhs, rel;
  bucket_edges view() const { return {lhs, rhs, rel}; }
};
bucket_columns read_bucket_columns(const storage::bucket_reader& bucket);

/// partition_count for sampled_rank_bucket on bucket (lhs_partition,
/// rhs_partition): the size of the side type's partition (partition 0 for
/// types with one partition). `space` must outlive the result.
std::function<std::int64_t(std::int64_t rel, side)> bucket_partition_counts(const entity_space& space,
                                                                            std::int64_t lhs_partition,
                                                                            std::int64_t rhs_partition);

struct sampled_options {
  std::int64_t batch_size = 1000;      // config.batch_size
  std::int64_t num_batch_negs = 50;    // config.num_batch_negs (0: uniform negatives only)
  std::int64_t num_uniform_negs = 50;  // config.num_uniform_negs
  std::vector<bool> all_negs;          // by relation id (config relations' all_negs); missing = false
  bool rank_lhs = true, rank_rhs = true; // !disable_lhs_negs, !disable_rhs_negs
  int threads = 1;
  /// PBG's evaluation order: the bucket is cut into this many equal slices
  /// (its worker processes, `workers`), and each slice is ordered by LibTorch's
  /// unstable sort of its relation ids before batching (docs/eval.md).
  int slices = 1;
  std::uint64_t seed = 0; // uniform draws of batch b use a generator seeded from (seed, b)
  /// When set and true, the remaining batches are skipped (checked before
  /// each batch) and the result says `stopped`.
  const std::atomic<bool>* stop = nullptr;
  /// When set, the loss of each batch and side, given the positive scores [B]
  /// and the negative scores [B, N] with masked entries at -1e9, is summed
  /// into the metrics' loss (held-out edges during training, as PBG reports).
  std::function<double(std::int64_t rel, const at::Tensor& pos, const at::Tensor& neg)> loss;
};

/// The candidates and mask of one side of one chunk of `n` edges:
/// candidates = the chunk's true ids on this side, then `num_uniform` draws in
/// [0, partition_count). split() turns the score matrix of these candidates,
/// `[n, n + u]`, into PBG's `[n, chunk_size + u]` negative matrix and mask
/// (the positives are scored on their own: pair_score_fn).
struct chunk_negatives {
  at::Tensor candidates; // [n + u] int64
  std::int64_t n = 0, chunk_size = 0, num_uniform = 0;
  bool batch_negs = true; // false: uniform negatives only

  static chunk_negatives make(std::span<const std::int64_t> true_ids, std::int64_t chunk_size,
                              std::int64_t num_uniform, bool batch_negs, std::int64_t partition_count,
                              std::mt19937_64& rng);
  /// From the [n, n + u] score matrix: negatives [n, k] and mask [n, k]
  /// (k = chunk_size + u with batch negatives, else u).
  void split(const at::Tensor& scores, at::Tensor& neg, at::Tensor& mask) const;
};

struct sampled_result {
  eval_stats stats;
  std::vector<std::int64_t> lhs_rank, rhs_rank; // per edge, in input order; 0 for a side not ranked
  bool stopped = false; // options.stop was set: the stats cover only some batches
};

/// Evaluates one bucket: edges grouped by relation, batches of batch_size,
/// spread over threads; per batch and side the ranks of rank_from_scores and
/// its AUC weighted by the batch's edge count (PBG). partition_count: entities
/// in the bucket's partition of a relation's side type. The negatives are
/// scored by `score`, the positives by `pair_score` (as PBG does: a negative
/// that is the true entity ties with the positive only up to rounding).
expected<sampled_result> sampled_rank_bucket(const bucket_edges& edges,
                                             const std::function<std::int64_t(std::int64_t rel, side)>& partition_count,
                                             const score_fn& score, const pair_score_fn& pair_score,
                                             const sampled_options& options);

} // namespace abg::eval
