// Dropout masks of the 1-vs-all training (runtime/train/dropout.h): the
// fraction dropped, the scale of what is kept, the same mask from the same
// key. Training with them: kernel_test.cpp.
#include <cmath>
#include <vector>

#include <doctest/doctest.h>

#include "runtime/train/dropout.h"

using abg::train::dropout_key;
using abg::train::dropout_row;
using abg::train::dropout_stream;

TEST_CASE("dropout_masks") {
  const int d = 128, rows = 2000;
  std::vector<float> in(d), out(d), again(d);
  for (int i = 0; i < d; ++i) in[static_cast<std::size_t>(i)] = 0.5f + static_cast<float>(i);
  for (const float p : {0.1f, 0.3f, 0.6f}) {
    CAPTURE(p);
    std::int64_t zeros = 0;
    std::vector<std::int64_t> per_element(d, 0);
    for (int r = 0; r < rows; ++r) {
      const auto key = dropout_key(7, dropout_stream::lhs_candidates, static_cast<std::uint64_t>(r));
      dropout_row(in.data(), out.data(), d, key, p);
      dropout_row(in.data(), again.data(), d, key, p);
      CHECK(out == again);
      for (int i = 0; i < d; ++i) {
        const auto u = static_cast<std::size_t>(i);
        if (out[u] == 0.0f) {
          ++zeros;
          ++per_element[u];
        } else {
          CHECK(out[u] == doctest::Approx(in[u] / (1.0f - p)));
        }
      }
    }
    // 256,000 draws: the fraction dropped within 0.01 of p, and every
    // element position dropped at about that rate (no stuck bits)
    CHECK(std::abs(static_cast<double>(zeros) / (rows * d) - p) < 0.01);
    for (const auto z : per_element) CHECK(std::abs(static_cast<double>(z) / rows - p) < 0.06);
  }
  // distinct streams, seeds and rows give distinct masks; p = 0 keeps all
  const float p = 0.5f;
  auto mask = [&](std::uint64_t seed, dropout_stream s, std::uint64_t row) {
    std::vector<float> m(d);
    dropout_row(in.data(), m.data(), d, dropout_key(seed, s, row), p);
    return m;
  };
  const auto base = mask(1, dropout_stream::lhs_queries, 3);
  CHECK(base != mask(2, dropout_stream::lhs_queries, 3));
  CHECK(base != mask(1, dropout_stream::rhs_queries, 3));
  CHECK(base != mask(1, dropout_stream::lhs_queries, 4));
  dropout_row(in.data(), out.data(), d, 12345, 0.0f);
  CHECK(out == in);
}
