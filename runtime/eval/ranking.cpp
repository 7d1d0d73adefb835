#include "abg/eval/ranking.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include <torch/torch.h>

namespace abg::eval {

entity_index::entity_index(std::vector<std::int64_t> counts) : counts_(std::move(counts)) {
  begins_.reserve(counts_.size() + 1);
  for (auto c : counts_)
    begins_.push_back(begins_.back() + c);
}

std::pair<std::int64_t, std::int64_t> entity_index::local(std::int64_t global_index) const {
  // The last partition whose begin is <= global_index (skipping empty partitions).
  auto it = std::upper_bound(begins_.begin(), begins_.end() - 1, global_index);
  const auto p = static_cast<std::int64_t>(it - begins_.begin()) - 1;
  return {p, global_index - begin(p)};
}

entity_space::entity_space(std::vector<entity_index> types,
                           std::vector<std::pair<std::size_t, std::size_t>> relation_types)
    : types_(std::move(types)), relation_types_(std::move(relation_types)) {
  for (const auto& [l, r] : relation_types_)
    if (l >= types_.size() || r >= types_.size())
      throw std::invalid_argument("entity_space: relation side type out of range");
}

expected<entity_space> entity_space::create(const config& cfg, const storage::entity_store_meta& meta) {
  std::vector<entity_index> types;
  auto type_number = [&](const std::string& name) -> expected<std::size_t> {
    for (std::size_t i = 0; i < cfg.entities.size(); ++i)
      if (cfg.entities[i].first == name)
        return i;
    return fail("relation side type '{}' is not an entity type of the config", name);
  };
  for (const auto& [name, schema] : cfg.entities) {
    const auto* info = meta.type(name);
    if (info == nullptr)
      return fail("entity type '{}' of the config is not in the entity path (run abg import)", name);
    types.emplace_back(info->counts);
  }
  std::vector<std::pair<std::size_t, std::size_t>> rel_types;
  if (cfg.relations.empty())
    return fail("the config has no relations");
  const std::size_t num_relations = cfg.dynamic_relations ? meta.relation_names.size() : cfg.relations.size();
  for (std::size_t r = 0; r < num_relations; ++r) {
    const auto& rel = cfg.dynamic_relations ? cfg.relations.front() : cfg.relations[r];
    auto l = type_number(rel.lhs);
    if (!l)
      return std::unexpected(l.error());
    auto rr = type_number(rel.rhs);
    if (!rr)
      return std::unexpected(rr.error());
    rel_types.emplace_back(*l, *rr);
  }
  return entity_space(std::move(types), std::move(rel_types));
}

ranked_scores rank_from_scores(const torch::Tensor& pos_in, const torch::Tensor& neg_in, const torch::Tensor& mask_in) {
  TORCH_CHECK(pos_in.dim() == 1 && neg_in.dim() == 2 && neg_in.size(0) == pos_in.size(0),
              "rank_from_scores: expected pos [n] and neg [n, k]");
  const auto pos_t = pos_in.to(torch::kFloat).contiguous();
  const auto neg_t = neg_in.to(torch::kFloat).contiguous();
  torch::Tensor mask_t;
  if (mask_in.defined()) {
    TORCH_CHECK(mask_in.sizes() == neg_in.sizes(), "rank_from_scores: mask must have the shape of neg");
    mask_t = mask_in.to(torch::kBool).contiguous();
  }
  const auto n = pos_t.size(0), k = neg_t.size(1);
  const float* pos = pos_t.data_ptr<float>();
  const float* neg = neg_t.data_ptr<float>();
  const bool* mask = mask_t.defined() ? mask_t.data_ptr<bool>() : nullptr;

  ranked_scores out;
  out.ranks.resize(static_cast<std::size_t>(n));
  std::vector<float> unmasked;
  unmasked.reserve(static_cast<std::size_t>(n * k));
  std::int64_t masked = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    std::int64_t ge = 0;
    const float p = pos[i];
    for (std::int64_t j = 0; j < k; ++j) {
      const auto at = i * k + j;
      if (mask != nullptr && mask[at]) {
        ++masked;
        continue;
      }
      ge += neg[at] >= p;
      unmasked.push_back(neg[at]);
    }
    out.ranks[static_cast<std::size_t>(i)] = 1 + ge;
  }
  if (k == 0 || n == 0) {
    out.auc = std::numeric_limits<double>::quiet_NaN();
    return out;
  }
  // NaN negatives are never beaten: sort them last and count only the ones below.
  std::sort(unmasked.begin(), unmasked.end(), [](float a, float b) { return a < b || (!std::isnan(a) && std::isnan(b)); });
  const auto finite_end = std::partition_point(unmasked.begin(), unmasked.end(), [](float v) { return !std::isnan(v); });
  double wins = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    const float p = pos[i];
    if (std::isnan(p))
      continue;
    wins += static_cast<double>(std::lower_bound(unmasked.begin(), finite_end, p) - unmasked.begin()) +
            static_cast<double>(masked);
  }
  out.auc = wins / (static_cast<double>(n) * static_cast<double>(n * k));
  return out;
}

} // namespace abg::eval
