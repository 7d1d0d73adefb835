// Partition loads of bucket orders with a bounded buffer, and the buffer
// order: every bucket once, and far fewer loads than PBG's orders.
#include <doctest/doctest.h>

#include <set>

#include "runtime/schedule/buffer_loads.h"

using namespace abg::schedule;

TEST_CASE("count_loads: LRU loads of an order") {
  // One partition per side fits any buffer: 1 or 2 loads.
  CHECK(count_loads({{0, 0}}, 2, true) == 1);
  CHECK(count_loads({{0, 0}}, 2, false) == 2);
  // (0,0) (0,1) (1,1) (1,0) with room for 2 shared partitions: 0, then 1.
  CHECK(count_loads({{0, 0}, {0, 1}, {1, 1}, {1, 0}}, 2, true) == 2);
  // Three partitions, room for 2: (0,1) (1,2) (2,0) loads 0, 1, 2, then 0 again (1 is older than 2).
  CHECK(count_loads({{0, 1}, {1, 2}, {2, 0}}, 2, true) == 4);
  // PBG's inside_out on 16 partitions with room for 4: 129 loads (issue "Bigger than memory").
  CHECK(count_loads(make_bucket_order(16, 16, bucket_order::inside_out, 0), 4, true) == 129);
  CHECK_THROWS_AS(count_loads({{0, 0}}, 1, true), std::invalid_argument);
}

TEST_CASE("buffer order: every bucket once, and at most 60% of PBG's best order's loads") {
  for (bool shared : {true, false})
    for (auto [nl, nr] : {std::pair{1, 1}, {4, 4}, {16, 16}, {7, 7}, {5, 3}, {32, 32}})
      for (int32_t capacity : {2, 3, 4, 8}) {
        if (shared && nl != nr) continue;
        CAPTURE(shared);
        CAPTURE(nl);
        CAPTURE(nr);
        CAPTURE(capacity);
        auto order = make_buffer_order(nl, nr, capacity, shared);
        std::set<bucket> seen(order.begin(), order.end());
        CHECK(order.size() == static_cast<std::size_t>(nl * nr));
        CHECK(seen.size() == order.size());
        auto ours = count_loads(order, capacity, shared, eviction::needed_last);
        std::int64_t best_pbg = INT64_MAX;
        for (auto o : {bucket_order::inside_out, bucket_order::outside_in, bucket_order::affinity, bucket_order::random})
          best_pbg = std::min(best_pbg, count_loads(make_bucket_order(nl, nr, o, 1), capacity, shared));
        CHECK(ours <= best_pbg);
        if (shared && nl >= 16 && capacity == 4) CHECK(ours * 10 <= best_pbg * 6);
      }
  // The figure of issue "Bigger than memory": 16 partitions, room for 4.
  auto loads = count_loads(make_buffer_order(16, 16, 4, true), 4, true, eviction::needed_last);
  MESSAGE("inside_out with Belady: ", count_loads(make_bucket_order(16, 16, bucket_order::inside_out, 0), 4, true, eviction::needed_last));
  MESSAGE("buffer order, 16 partitions, capacity 4: ", loads, " loads (inside_out: 129)");
  CHECK(loads * 10 <= 129 * 6);
}
