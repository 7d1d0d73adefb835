#include "abg/eval/model_score.h"

#include <torch/torch.h>

namespace abg::eval {

score_fn model_score(const model::model_desc& m, const model::shared_params& params, table_fn table) {
  return [&m, &params, table = std::move(table)](side s, std::int64_t rel, const at::Tensor& anchors,
                                                 const at::Tensor& candidates) -> at::Tensor {
    const auto anchor_side = s == side::rhs ? side::lhs : side::rhs;
    auto anchor_rows = table(rel, anchor_side).index_select(0, anchors);
    auto candidate_rows = table(rel, s).index_select(0, candidates);
    auto rel_ids = torch::full({anchors.size(0)}, rel, torch::kInt64);
    // The replaced side's own row is irrelevant to the candidate scores; any row of the right shape does.
    auto filler = candidate_rows.narrow(0, 0, 1).expand({anchors.size(0), candidate_rows.size(1)});
    auto scores = s == side::rhs
                    ? model::score_candidates(m, params, model::side::rhs, anchor_rows, filler, rel_ids, candidate_rows)
                    : model::score_candidates(m, params, model::side::lhs, filler, anchor_rows, rel_ids, candidate_rows);
    return scores.neg;
  };
}

pair_score_fn model_pair_score(const model::model_desc& m, const model::shared_params& params, table_fn table) {
  return [&m, &params, table = std::move(table)](side s, std::int64_t rel, const at::Tensor& anchors,
                                                 const at::Tensor& truths) -> at::Tensor {
    const auto anchor_side = s == side::rhs ? side::lhs : side::rhs;
    auto anchor_rows = table(rel, anchor_side).index_select(0, anchors);
    auto truth_rows = table(rel, s).index_select(0, truths);
    auto rel_ids = torch::full({anchors.size(0)}, rel, torch::kInt64);
    auto none = truth_rows.narrow(0, 0, 0); // no candidates: only the positives are wanted
    auto scores = s == side::rhs
                    ? model::score_candidates(m, params, model::side::rhs, anchor_rows, truth_rows, rel_ids, none)
                    : model::score_candidates(m, params, model::side::lhs, truth_rows, anchor_rows, rel_ids, none);
    return scores.pos;
  };
}

} // namespace abg::eval
