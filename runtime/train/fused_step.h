// The fused CPU path of the bucket kernel: one batch's forward pass, gradients
// and Adagrad updates written by hand on raw float buffers, with the score
// matrices as CBLAS sgemm calls. Same contract and results (up to float
// rounding) as the LibTorch reference path in kernel.cpp, without its
// per-operation dispatch and temporary tensors. Covers the comparators dot and
// cos without bias, the element-wise operators (none, diagonal, translation,
// complex_diagonal), every loss, max_norm, N3, global embeddings, dynamic
// relations and sampled negatives; everything else takes the reference path.
#pragma once

#include <cstdint>
#include <memory>
#include <random>
#include <span>
#include <string>

#include "abg/model/kernel.h"

namespace abg::train {

/// Why the fused path cannot train model `m` on `tables` (empty: it can).
std::string fused_unsupported_reason(const model::model_desc& m, const bucket_tables& tables);

/// Edges of one batch: raw arrays of `size` entries (weight may be null: 1).
struct batch_ref {
  const std::int64_t* lhs = nullptr;
  const std::int64_t* rhs = nullptr;
  const std::int64_t* rel = nullptr;
  const float* weight = nullptr;
  std::int64_t size = 0;
  /// KvsAll: per edge, the known answers of its lhs (0) and rhs (1) query
  /// (known_answers::of); null in 1vsAll.
  const std::span<const std::int64_t>* answers[2] = {nullptr, nullptr};
};

/// One worker's fused batch step; owns the buffers reused from batch to batch.
class fused_step {
public:
  fused_step();
  ~fused_step();
  fused_step(fused_step&&) noexcept;
  fused_step& operator=(fused_step&&) noexcept;

  /// Trains one batch (one relation without dynamic relations) exactly as the
  /// reference path's train_step: draws the negatives from `rng` in the same
  /// order, sums each row's gradient over the batch, then applies row-wise
  /// Adagrad to the embeddings and element-wise Adagrad to the global
  /// embeddings and operator parameters (HOGWILD writes). Returns the loss.
  double operator()(const model::model_desc& m, bucket_tables& tables, model::shared_params& p, const batch_ref& b,
                    std::mt19937_64& rng, double lr, double relation_lr);

private:
  struct buffers;
  std::unique_ptr<buffers> b_;
};

} // namespace abg::train
