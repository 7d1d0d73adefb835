#include "abg/eval/model_score.h"

#include <torch/torch.h>

namespace abg::eval {
namespace {

// score_candidates for `anchors` (ids on the side kept) with `replaced` [B, d]
// as the rows of the side replaced and `candidates` [N, d] replacing it.
model::side_scores score_side(const model::model_desc& m, const model::shared_params& params, const table_fn& table,
                              side s, std::int64_t rel, const at::Tensor& anchors, const at::Tensor& replaced,
                              const at::Tensor& candidates) {
  auto anchor_rows = table(rel, s == side::rhs ? side::lhs : side::rhs).index_select(0, anchors);
  auto rel_ids = torch::full({anchors.size(0)}, rel, torch::kInt64);
  return s == side::rhs
           ? model::score_candidates(m, params, model::side::rhs, anchor_rows, replaced, rel_ids, candidates)
           : model::score_candidates(m, params, model::side::lhs, replaced, anchor_rows, rel_ids, candidates);
}

} // namespace

score_fn model_score(const model::model_desc& m, const model::shared_params& params, table_fn table) {
  return [&m, &params, table = std::move(table)](side s, std::int64_t rel, const at::Tensor& anchors,
                                                 const at::Tensor& candidates) -> at::Tensor {
    auto candidate_rows = table(rel, s).index_select(0, candidates);
    // The replaced side's own row is irrelevant to the candidate scores; any row of the right shape does.
    auto filler = candidate_rows.narrow(0, 0, 1).expand({anchors.size(0), candidate_rows.size(1)});
    return score_side(m, params, table, s, rel, anchors, filler, candidate_rows).neg;
  };
}

pair_score_fn model_pair_score(const model::model_desc& m, const model::shared_params& params, table_fn table) {
  return [&m, &params, table = std::move(table)](side s, std::int64_t rel, const at::Tensor& anchors,
                                                 const at::Tensor& truths) -> at::Tensor {
    auto truth_rows = table(rel, s).index_select(0, truths);
    // No candidates: only the positives are wanted.
    return score_side(m, params, table, s, rel, anchors, truth_rows, truth_rows.narrow(0, 0, 0)).pos;
  };
}

} // namespace abg::eval
