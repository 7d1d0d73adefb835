// The model as the ranking protocols' scoring callback: score_candidates over
// tables the caller picks per relation and side. Shared by `abg eval` and the
// held-out evaluation during training (eval_fraction).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include <ATen/core/Tensor.h>

#include "abg/eval/ranking.h"
#include "abg/model/model.h"

namespace abg::eval {

/// The embedding table [count, d] whose rows the ids of side `s` of relation
/// `rel` index (global ids: a type's partitions back to back; sampled: the
/// bucket's partition).
using table_fn = std::function<at::Tensor(std::int64_t rel, side s)>;

/// The rows [ids.size(0), d] of the table side `s` of relation `rel` indexes,
/// for the ids given: a table too big to hold whole may gather them from its
/// parts.
using rows_fn = std::function<at::Tensor(std::int64_t rel, side s, const at::Tensor& ids)>;

/// rows_fn of whole tables: table(rel, s).index_select(0, ids).
rows_fn rows_of(table_fn table);

/// The rows at global indices `ids` of a table kept as `parts` back to back
/// (a type's partitions), gathered from the parts they lie in, never joined:
/// ids within one part are a gather from that part alone. Throws
/// std::out_of_range for an id beyond the parts.
at::Tensor gather_rows(const std::vector<at::Tensor>& parts, const at::Tensor& ids);

/// score(side, rel, anchors, candidates) of the model: `rows` of the
/// anchors and candidates, global embeddings and operators applied as in
/// training (model::score_candidates). `m` and `params` must outlive the
/// result; it only reads them, so it may run beside HOGWILD training.
score_fn model_score(const model::model_desc& m, const model::shared_params& params, rows_fn rows);

/// pair_score(side, rel, anchors, truths) of the model: the positive scores of
/// model::score_candidates, one element-wise product summed per edge, as
/// PBG's comparators score positives (its negatives are one matrix product;
/// the two round differently, which decides ties in sampled ranking).
pair_score_fn model_pair_score(const model::model_desc& m, const model::shared_params& params, rows_fn rows);

} // namespace abg::eval
