#include "runtime/train/known_answers.h"

#include <algorithm>
#include <numeric>
#include <tuple>

namespace abg::train {

known_answers known_answers::build(const std::int64_t* lhs, const std::int64_t* rhs, const std::int64_t* rel,
                                   std::int64_t n) {
  known_answers k;
  const auto un = static_cast<std::size_t>(n);
  std::vector<std::int64_t> order(un);
  for (int s = 0; s < 2; ++s) {
    // the query's fixed entity, and the answer
    const std::int64_t* fixed = s == 0 ? rhs : lhs;
    const std::int64_t* answer = s == 0 ? lhs : rhs;
    auto& side = k.sides_[s];
    side.entities.clear();
    side.first.assign(un, 0);
    side.count.assign(un, 0);
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](std::int64_t a, std::int64_t b) {
      return std::tie(rel[a], fixed[a], answer[a]) < std::tie(rel[b], fixed[b], answer[b]);
    });
    for (std::size_t i = 0; i < un;) {
      const auto q = order[i];
      std::size_t j = i;
      const auto start = static_cast<std::int64_t>(side.entities.size());
      for (; j < un && rel[order[j]] == rel[q] && fixed[order[j]] == fixed[q]; ++j)
        if (side.entities.size() == static_cast<std::size_t>(start) || side.entities.back() != answer[order[j]])
          side.entities.push_back(answer[order[j]]);
      const auto count = static_cast<std::int32_t>(static_cast<std::int64_t>(side.entities.size()) - start);
      for (; i < j; ++i) {
        side.first[static_cast<std::size_t>(order[i])] = start;
        side.count[static_cast<std::size_t>(order[i])] = count;
      }
    }
  }
  return k;
}

} // namespace abg::train
