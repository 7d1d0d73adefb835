#include "abg/eval/model_score.h"

#include <stdexcept>

#include <fmt/format.h>
#include <torch/torch.h>

namespace abg::eval {
namespace {

// score_candidates for `anchors` (ids on the side kept) with `replaced` [B, d]
// as the rows of the side replaced and `candidates` [N, d] replacing it.
model::side_scores score_side(const model::model_desc& m, const model::shared_params& params, const rows_fn& rows,
                              side s, std::int64_t rel, const at::Tensor& anchors, const at::Tensor& replaced,
                              const at::Tensor& candidates) {
  auto anchor_rows = rows(rel, s == side::rhs ? side::lhs : side::rhs, anchors);
  auto rel_ids = torch::full({anchors.size(0)}, rel, torch::kInt64);
  return s == side::rhs
           ? model::score_candidates(m, params, model::side::rhs, anchor_rows, replaced, rel_ids, candidates)
           : model::score_candidates(m, params, model::side::lhs, replaced, anchor_rows, rel_ids, candidates);
}

} // namespace

rows_fn rows_of(table_fn table) {
  return [table = std::move(table)](std::int64_t rel, side s, const at::Tensor& ids) {
    return table(rel, s).index_select(0, ids);
  };
}

at::Tensor gather_rows(const std::vector<at::Tensor>& parts, const at::Tensor& ids) {
  if (parts.empty()) throw std::out_of_range("rows asked of a table without parts");
  if (parts.size() == 1) return parts.front().index_select(0, ids);
  std::vector<std::int64_t> first{0}; // of each part, and the end
  for (const auto& p : parts) first.push_back(first.back() + p.size(0));
  if (ids.numel() == 0) return parts.front().narrow(0, 0, 0).clone();
  const auto lo = ids.min().item<std::int64_t>(), hi = ids.max().item<std::int64_t>();
  if (lo < 0 || hi >= first.back())
    throw std::out_of_range(fmt::format("row {} asked of a table of {}", lo < 0 ? lo : hi, first.back()));
  for (std::size_t k = 0; k < parts.size(); ++k)
    if (lo >= first[k] && hi < first[k + 1]) return parts[k].index_select(0, ids - first[k]);
  auto out = torch::empty({ids.size(0), parts.front().size(1)}, parts.front().options());
  for (std::size_t k = 0; k < parts.size(); ++k) {
    auto where = ids.ge(first[k]).logical_and(ids.lt(first[k + 1])).nonzero().squeeze(1);
    if (where.numel() > 0) out.index_copy_(0, where, parts[k].index_select(0, ids.index_select(0, where) - first[k]));
  }
  return out;
}

score_fn model_score(const model::model_desc& m, const model::shared_params& params, rows_fn rows) {
  return [&m, &params, rows = std::move(rows)](side s, std::int64_t rel, const at::Tensor& anchors,
                                               const at::Tensor& candidates) -> at::Tensor {
    auto candidate_rows = rows(rel, s, candidates);
    // The replaced side's own row is irrelevant to the candidate scores; any row of the right shape does.
    auto filler = candidate_rows.narrow(0, 0, 1).expand({anchors.size(0), candidate_rows.size(1)});
    return score_side(m, params, rows, s, rel, anchors, filler, candidate_rows).neg;
  };
}

pair_score_fn model_pair_score(const model::model_desc& m, const model::shared_params& params, rows_fn rows) {
  return [&m, &params, rows = std::move(rows)](side s, std::int64_t rel, const at::Tensor& anchors,
                                               const at::Tensor& truths) -> at::Tensor {
    auto truth_rows = rows(rel, s, truths);
    // No candidates: only the positives are wanted.
    return score_side(m, params, rows, s, rel, anchors, truth_rows, truth_rows.narrow(0, 0, 0)).pos;
  };
}

} // namespace abg::eval
