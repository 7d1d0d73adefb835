// The fused 1-vs-all batch step (PBG's all_negs, kbc's and LibKGE's
// "1vsAll"): every query of a batch is scored against every entity of the
// partition, and every entity's row gets its gradient. The entity dimension
// is cut into tiles of at most tile_floats / B entities, so the score matrix
// in memory is bounded whatever the partition's size, and the tiles are split
// among a team of threads (no HOGWILD: each thread owns its entities' rows).
// Same contract and results (up to float rounding) as the LibTorch reference
// path in kernel.cpp for the models it covers: comparators dot and cos
// without bias, the element-wise operators, every loss, N3, global
// embeddings, dynamic relations, dropout, KvsAll targets (batch_ref::answers);
// no max_norm.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "abg/model/kernel.h"
#include "runtime/train/fused_step.h"
#include "runtime/train/thread_team.h"

namespace abg::train {

/// Why the 1-vs-all kernel cannot train model `m` on `tables` (empty: it
/// can). It trains models whose every relation has all_negs.
std::string all_negs_unsupported_reason(const model::model_desc& m, const bucket_tables& tables);

/// Whether all_negs_precision = "bfloat16" takes effect here: oneDNN's
/// bfloat16 GEMM is loaded and the CPU has AVX512-BF16 (else float32).
bool bf16_products_available();

class all_negs_step {
public:
  /// Scores of at most `tile_floats` floats per thread at a time (kernel_options::score_tile_floats).
  all_negs_step(thread_team& team, std::int64_t tile_floats);
  ~all_negs_step();

  /// Trains one batch (one relation without dynamic relations) as the
  /// reference path's train_step does with all_negs: the loss of each side
  /// over the positive and every other entity, each row's gradient summed
  /// over the batch, then row-wise Adagrad on every row of the tables and
  /// element-wise Adagrad on global embeddings and operator parameters.
  /// With any dropout (query, candidate, query entity, relation), `seed` keys the batch's
  /// masks (dropout.h). Returns the loss.
  double operator()(const model::model_desc& m, bucket_tables& tables, model::shared_params& p, const batch_ref& b,
                    double lr, double relation_lr, std::uint64_t seed);

private:
  struct buffers;
  thread_team& team_;
  std::int64_t tile_floats_;
  std::unique_ptr<buffers> b_;
};

} // namespace abg::train
