// The k highest of many scores without sorting them all: a bounded heap of
// the best k seen so far, which most scores pass by with one comparison.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace abg::model {

struct scored_index {
  std::int64_t index = 0;
  float score = 0;
  friend bool operator==(const scored_index&, const scored_index&) = default;
};

/// The min(k, scores.size()) highest scores with their indices, best first;
/// equal scores in index order, NaN below every number.
std::vector<scored_index> top_k(std::span<const float> scores, std::int64_t k);

} // namespace abg::model
