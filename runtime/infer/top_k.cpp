#include "abg/model/top_k.h"

#include <algorithm>
#include <cmath>

namespace abg::model {

namespace {

// a ranks before b: higher score (NaN lowest), then lower index.
bool better(const scored_index& a, const scored_index& b) {
  const bool an = std::isnan(a.score), bn = std::isnan(b.score);
  if (an != bn)
    return bn;
  if (!an && a.score != b.score)
    return a.score > b.score;
  return a.index < b.index;
}

} // namespace

std::vector<scored_index> top_k(std::span<const float> scores, std::int64_t k) {
  const auto n = static_cast<std::int64_t>(scores.size());
  k = std::clamp<std::int64_t>(k, 0, n);
  std::vector<scored_index> heap; // the worst of the best k on top
  if (k == 0)
    return heap;
  heap.reserve(static_cast<std::size_t>(k));
  std::int64_t i = 0;
  for (; i < k; ++i)
    heap.push_back({i, scores[static_cast<std::size_t>(i)]});
  std::make_heap(heap.begin(), heap.end(), better);
  for (; i < n; ++i) {
    const float s = scores[static_cast<std::size_t>(i)];
    if (std::isnan(s))
      continue;
    // Later indices lose ties, so only a strictly higher score (or any number over a NaN) enters.
    if (!std::isnan(heap.front().score) && !(s > heap.front().score))
      continue;
    std::pop_heap(heap.begin(), heap.end(), better);
    heap.back() = {i, s};
    std::push_heap(heap.begin(), heap.end(), better);
  }
  std::sort_heap(heap.begin(), heap.end(), better);
  return heap;
}

} // namespace abg::model
