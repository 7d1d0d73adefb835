// KvsAll's index of each edge's known answers (runtime/train/known_answers.h).
#include <vector>

#include <doctest/doctest.h>

#include "runtime/train/known_answers.h"

using abg::train::known_answers;

namespace {
std::vector<std::int64_t> list(std::span<const std::int64_t> s) { return {s.begin(), s.end()}; }
} // namespace

TEST_CASE("known_answers_per_edge_query") {
  // (h, r, t): two tails for (0, 0, ?), one edge twice, another relation
  const std::vector<std::int64_t> lhs{0, 0, 0, 3, 0}, rhs{2, 1, 2, 1, 1}, rel{0, 0, 0, 0, 1};
  const auto k = known_answers::build(lhs.data(), rhs.data(), rel.data(), 5);
  using v = std::vector<std::int64_t>;
  // rhs queries (h, r, ?): sorted, distinct
  CHECK(list(k.of(1, 0)) == v{1, 2});
  CHECK(list(k.of(1, 1)) == v{1, 2});
  CHECK(list(k.of(1, 2)) == v{1, 2});
  CHECK(list(k.of(1, 3)) == v{1});
  CHECK(list(k.of(1, 4)) == v{1}); // (0, 1, ?): relation 1 is its own query
  // lhs queries (?, r, t)
  CHECK(list(k.of(0, 0)) == v{0});
  CHECK(list(k.of(0, 1)) == v{0, 3});
  CHECK(list(k.of(0, 3)) == v{0, 3});
  CHECK(list(k.of(0, 4)) == v{0});
}
