#include "abg/eval/ranking.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>

#include <torch/torch.h>

namespace abg::eval {

namespace {

// An unsigned key with the order of the (non-NaN) floats: a < b iff key(a) < key(b);
// -0 and +0 get the same key, as they compare equal.
std::uint32_t order_key(float v) {
  v += 0.0f; // -0 -> +0
  std::uint32_t u;
  std::memcpy(&u, &v, sizeof u);
  return (u & 0x80000000u) != 0 ? ~u : (u | 0x80000000u);
}

// LSD radix sort of 32-bit keys, three passes of 11 bits.
void radix_sort(std::vector<std::uint32_t>& keys) {
  if (keys.size() < 256) {
    std::sort(keys.begin(), keys.end());
    return;
  }
  constexpr int bits = 11, passes = 3;
  constexpr std::size_t radix = std::size_t{1} << bits;
  std::vector<std::size_t> counts(radix * passes, 0);
  for (auto key : keys)
    for (int pass = 0; pass < passes; ++pass)
      ++counts[static_cast<std::size_t>(pass) * radix + ((key >> (pass * bits)) & (radix - 1))];
  std::vector<std::uint32_t> buffer(keys.size());
  for (int pass = 0; pass < passes; ++pass) {
    auto* c = counts.data() + static_cast<std::size_t>(pass) * radix;
    std::size_t sum = 0;
    for (std::size_t d = 0; d < radix; ++d) {
      auto here = c[d];
      c[d] = sum;
      sum += here;
    }
    for (auto key : keys)
      buffer[c[(key >> (pass * bits)) & (radix - 1)]++] = key;
    keys.swap(buffer);
  }
}

} // namespace

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
  if (k == 0 || n == 0) {
    for (std::int64_t i = 0; i < n; ++i)
      out.ranks[static_cast<std::size_t>(i)] = 1;
    out.auc = std::numeric_limits<double>::quiet_NaN();
    return out;
  }
  // Ranks row by row; the AUC counts (positive, negative) pairs over all
  // rows: the unmasked, non-NaN negatives go into one array that is radix
  // sorted as order-preserving integer keys and merged with the sorted
  // positives (linear in n·k; a comparison sort of n·k floats costs about
  // ten times as much). NaN positives beat nothing, NaN negatives are never
  // beaten, masked entries are beaten by every non-NaN positive.
  std::vector<std::uint32_t> neg_keys;
  neg_keys.reserve(static_cast<std::size_t>(n * k));
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
      const float v = neg[at];
      ge += v >= p;
      if (!std::isnan(v))
        neg_keys.push_back(order_key(v));
    }
    out.ranks[static_cast<std::size_t>(i)] = 1 + ge;
  }
  std::vector<std::uint32_t> pos_keys;
  pos_keys.reserve(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i)
    if (!std::isnan(pos[i]))
      pos_keys.push_back(order_key(pos[i]));
  std::sort(pos_keys.begin(), pos_keys.end());
  radix_sort(neg_keys);
  double below = 0; // (positive, unmasked negative) pairs with negative < positive
  std::size_t next = 0;
  for (auto key : pos_keys) {
    while (next < neg_keys.size() && neg_keys[next] < key)
      ++next;
    below += static_cast<double>(next);
  }
  const double wins = below + static_cast<double>(masked) * static_cast<double>(pos_keys.size());
  out.auc = wins / (static_cast<double>(n) * static_cast<double>(n * k));
  return out;
}

} // namespace abg::eval
