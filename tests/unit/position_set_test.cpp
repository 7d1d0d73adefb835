// position_set against std::set: random inserts, erases and next() queries
// over sizes around the word and level boundaries.
#include <doctest/doctest.h>

#include <random>
#include <set>

#include "runtime/schedule/position_set.h"

using abg::schedule::position_set;

TEST_CASE("position_set finds the next member as std::set does") {
  std::mt19937_64 rng(3);
  for (std::size_t n : {1u, 2u, 63u, 64u, 65u, 4095u, 4096u, 4097u, 300000u}) {
    CAPTURE(n);
    position_set s;
    std::set<std::size_t> model;
    if (n % 2 == 0) {
      s.fill(n);
      for (std::size_t p = 0; p < n; ++p) model.insert(p);
    } else {
      s.reset(n);
    }
    for (int step = 0; step < 20000; ++step) {
      const std::size_t p = rng() % n;
      switch (rng() % 3) {
        case 0: s.insert(p), model.insert(p); break;
        case 1: s.erase(p), model.erase(p); break;
        default: {
          auto it = model.lower_bound(p);
          REQUIRE(s.next(p) == (it == model.end() ? position_set::npos : *it));
        }
      }
      REQUIRE(s.contains(p) == model.contains(p));
    }
    // Walk every member in order.
    std::size_t count = 0;
    for (auto p = s.next(0); p != position_set::npos; p = s.next(p + 1)) {
      REQUIRE(model.contains(p));
      ++count;
    }
    CHECK(count == model.size());
    CHECK(s.next(n) == position_set::npos);
  }
}
