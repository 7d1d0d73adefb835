// The model as the ranking protocols' scoring callback: score_candidates over
// tables the caller picks per relation and side. Shared by `abg eval` and the
// held-out evaluation during training (eval_fraction).
#pragma once

#include <cstdint>
#include <functional>

#include <ATen/core/Tensor.h>

#include "abg/eval/ranking.h"
#include "abg/model/model.h"

namespace abg::eval {

/// The embedding table [count, d] whose rows the ids of side `s` of relation
/// `rel` index (global ids: a type's partitions back to back; sampled: the
/// bucket's partition).
using table_fn = std::function<at::Tensor(std::int64_t rel, side s)>;

/// score(side, rel, anchors, candidates) of the model: rows of `table` for the
/// anchors and candidates, global embeddings and operators applied as in
/// training (model::score_candidates). `m` and `params` must outlive the
/// result; it only reads them, so it may run beside HOGWILD training.
score_fn model_score(const model::model_desc& m, const model::shared_params& params, table_fn table);

/// pair_score(side, rel, anchors, truths) of the model: the positive scores of
/// model::score_candidates, one element-wise product summed per edge, as
/// PBG's comparators score positives (its negatives are one matrix product;
/// the two round differently, which decides ties in sampled ranking).
pair_score_fn model_pair_score(const model::model_desc& m, const model::shared_params& params, table_fn table);

} // namespace abg::eval
