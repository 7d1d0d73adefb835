#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <stdexcept>

#include "actors/bucket_scheduler.h"

using namespace abg::actors;

namespace {

constexpr bucket_order kOrders[] = {bucket_order::random, bucket_order::affinity,
                                    bucket_order::inside_out, bucket_order::outside_in};

// Independent check of "allowed" from the rules, not from the scheduler's code.
struct oracle {
  scheduler_config cfg;
  std::set<std::pair<int, int>> init;  // (side, part); shared -> side 0
  std::pair<int, int> k(int side, int part) const { return {cfg.shared_partitions ? 0 : side, part}; }
  oracle(scheduler_config c) : cfg(c) {
    init.insert(k(0, 0));
    init.insert(k(1, 0));
  }
  bool lockable(int side) const {
    return (cfg.shared_partitions ? cfg.nparts_lhs : (side == 0 ? cfg.nparts_lhs : cfg.nparts_rhs)) > 1;
  }
  bool allowed(bucket b, bool first, const std::set<bucket>& done, const std::map<trainer_id, bucket>& held) const {
    if (done.contains(b)) return false;
    for (const auto& [t, h] : held) {
      if (h == b) return false;
      auto hp = std::set{k(0, h.lhs), k(1, h.rhs)};
      if (lockable(0) && hp.contains(k(0, b.lhs))) return false;
      if (lockable(1) && hp.contains(k(1, b.rhs))) return false;
    }
    if (first && cfg.tree_init_order && !init.contains(k(0, b.lhs)) && !init.contains(k(1, b.rhs)))
      return false;
    return true;
  }
};

// Drives one scheduler with `n` trainers in a random interleaving for `epochs`
// epochs, checking every rule at every step.
void simulate(scheduler_config cfg, int epochs, uint64_t seed) {
  bucket_scheduler s(cfg);
  oracle o(cfg);
  std::mt19937_64 rng(seed);
  std::map<trainer_id, std::optional<bucket>> previous;
  for (int e = 0; e < epochs; ++e) {
    s.start_epoch(e);
    std::set<bucket> done;
    std::map<trainer_id, bucket> held;
    std::map<bucket, int> count;
    std::set<trainer_id> finished;
    int steps = 0;
    while (finished.size() < static_cast<std::size_t>(cfg.num_trainers)) {
      REQUIRE(++steps < 100000);
      trainer_id t = static_cast<trainer_id>(rng() % static_cast<uint64_t>(cfg.num_trainers));
      if (finished.contains(t)) continue;
      if (held.contains(t)) {
        bucket b = held[t];
        REQUIRE(s.release(t, b));
        CHECK_FALSE(s.release(t, b));  // double release refused
        held.erase(t);
        done.insert(b);
        ++count[b];
        o.init.insert(o.k(0, b.lhs));
        o.init.insert(o.k(1, b.rhs));
        previous[t] = b;
        continue;
      }
      auto r = s.acquire(t, previous[t]);
      if (r.what == acquire_result::kind::bucket) {
        CHECK(o.allowed(r.assigned, e == 0, done, held));
        held[t] = r.assigned;
        // Never two trainers holding one partition.
        std::map<std::pair<int, int>, int> owners;
        for (const auto& [tt, hb] : held) {
          if (o.lockable(0)) ++owners[o.k(0, hb.lhs)];
          if (o.lockable(1) && o.k(1, hb.rhs) != o.k(0, hb.lhs)) ++owners[o.k(1, hb.rhs)];
        }
        for (const auto& [p, c] : owners) CHECK(c == 1);
      } else if (r.what == acquire_result::kind::wait) {
        // wait only while no allowed bucket exists and some remain.
        CHECK(done.size() < s.num_buckets());
        for (const auto& b : s.order()) CHECK_FALSE(o.allowed(b, e == 0, done, held));
      } else {
        CHECK(done.size() == s.num_buckets());
        finished.insert(t);
      }
    }
    CHECK(s.epoch_done());
    CHECK(count.size() == s.num_buckets());
    for (const auto& [b, c] : count) CHECK(c == 1);
  }
}

}  // namespace

TEST_CASE("bucket orders are permutations of the grid") {
  for (auto order : kOrders)
    for (auto [nl, nr] : {std::pair{1, 1}, {1, 4}, {3, 1}, {2, 2}, {4, 4}, {3, 5}, {6, 2}}) {
      auto v = make_bucket_order(nl, nr, order, 7);
      CHECK(v.size() == static_cast<std::size_t>(nl * nr));
      std::set<bucket> s(v.begin(), v.end());
      CHECK(s.size() == v.size());
      for (auto b : v) CHECK((b.lhs >= 0 && b.lhs < nl && b.rhs >= 0 && b.rhs < nr));
    }
  // inside_out walks L-shaped layers min(i,j) = k outward; outside_in is its reverse.
  auto io = make_bucket_order(4, 4, bucket_order::inside_out, 0);
  for (std::size_t p = 1; p < io.size(); ++p)
    CHECK(std::min(io[p - 1].lhs, io[p - 1].rhs) <= std::min(io[p].lhs, io[p].rhs));
  auto oi = make_bucket_order(4, 4, bucket_order::outside_in, 0);
  std::reverse(oi.begin(), oi.end());
  CHECK(oi == io);
  // affinity: after (i, j) comes (j, i) when still remaining.
  auto af = make_bucket_order(4, 4, bucket_order::affinity, 3);
  std::set<bucket> seen;
  for (std::size_t p = 0; p + 1 < af.size(); ++p) {
    seen.insert(af[p]);
    bucket mirror{af[p].rhs, af[p].lhs};
    if (!seen.contains(mirror)) CHECK(af[p + 1] == mirror);
  }
  CHECK(parse_bucket_order("outside_in") == bucket_order::outside_in);
  CHECK_FALSE(parse_bucket_order("sideways").has_value());
}

TEST_CASE("every bucket once per epoch, no shared partition, no needless wait") {
  uint64_t seed = 1;
  for (auto order : kOrders)
    for (int n : {1, 2, 4})
      for (auto [nl, nr] : {std::pair{1, 1}, {1, 4}, {2, 2}, {4, 4}, {3, 5}, {8, 8}, {5, 1}})
        for (bool shared : {false, true}) {
          if (shared && nl != nr) continue;
          CAPTURE(to_string(order));
          CAPTURE(n);
          CAPTURE(nl);
          CAPTURE(nr);
          CAPTURE(shared);
          scheduler_config cfg{.nparts_lhs = nl, .nparts_rhs = nr, .order = order, .seed = seed,
                               .shared_partitions = shared, .num_trainers = n};
          simulate(cfg, 3, ++seed);
        }
}

TEST_CASE("one trainer follows bucket_order exactly") {
  for (auto order : kOrders) {
    // After the first epoch (no init rule), the order is exactly bucket_order.
    scheduler_config cfg{.nparts_lhs = 4, .nparts_rhs = 4, .order = order, .seed = 11};
    bucket_scheduler s(cfg);
    for (int e = 0; e < 3; ++e) {
      s.start_epoch(e);
      std::vector<bucket> got;
      std::optional<bucket> prev;
      for (;;) {
        auto r = s.acquire(0, prev);
        if (r.what == acquire_result::kind::done) break;
        REQUIRE(r.what == acquire_result::kind::bucket);
        got.push_back(r.assigned);
        REQUIRE(s.release(0, r.assigned));
        prev = r.assigned;
      }
      if (e > 0 || order == bucket_order::inside_out) CHECK(got == s.order());
      CHECK(got.size() == 16);
    }
  }
  // Without the init rule, even the first epoch follows the order exactly.
  scheduler_config cfg{.nparts_lhs = 3, .nparts_rhs = 3, .order = bucket_order::outside_in,
                       .tree_init_order = false};
  bucket_scheduler s(cfg);
  s.start_epoch(0);
  std::vector<bucket> got;
  for (auto r = s.acquire(0, {}); r.what == acquire_result::kind::bucket; r = s.acquire(0, got.back())) {
    got.push_back(r.assigned);
    s.release(0, r.assigned);
  }
  CHECK(got == s.order());
}

TEST_CASE("first-epoch rule") {
  scheduler_config cfg{.nparts_lhs = 3, .nparts_rhs = 3, .order = bucket_order::outside_in, .num_trainers = 2};
  bucket_scheduler s(cfg);
  s.start_epoch(0);
  CHECK(s.allowed({0, 2}));
  CHECK(s.allowed({2, 0}));
  CHECK_FALSE(s.allowed({2, 2}));
  CHECK_FALSE(s.allowed({1, 2}));
  // outside_in starts at (2,2), which is not allowed: the first bucket has partition 0.
  auto r = s.acquire(0, {});
  REQUIRE(r.what == acquire_result::kind::bucket);
  CHECK((r.assigned.lhs == 0 || r.assigned.rhs == 0));
  // (1,2) becomes allowed once lhs 1 is initialised by releasing (1,0).
  s.trainer_died(0);
  s.start_epoch(0);
  // Take (1,0) explicitly through a one-trainer order walk.
  scheduler_config one{.nparts_lhs = 3, .nparts_rhs = 3, .order = bucket_order::inside_out};
  bucket_scheduler t(one);
  t.start_epoch(0);
  // inside_out: (0,0) (0,1) (1,0) (0,2) (2,0) (1,1) ...
  std::vector<bucket> want{{0, 0}, {0, 1}, {1, 0}, {0, 2}, {2, 0}, {1, 1}, {1, 2}, {2, 1}, {2, 2}};
  CHECK(t.order() == want);
  CHECK_FALSE(t.is_initialised(0, 1));
  auto a = t.acquire(0, {});
  t.release(0, a.assigned);
  a = t.acquire(0, a.assigned);
  CHECK(a.assigned == bucket{0, 1});
  t.release(0, a.assigned);
  CHECK(t.is_initialised(1, 1));
  CHECK_FALSE(t.is_initialised(0, 1));
  // Later epochs have no rule.
  scheduler_config later = cfg;
  bucket_scheduler u(later);
  u.start_epoch(1);
  CHECK(u.allowed({2, 2}));
}

TEST_CASE("two trainers: second one waits only when nothing is allowed") {
  // 1x1 grid: the second trainer must wait while the first holds the only bucket.
  bucket_scheduler s({.nparts_lhs = 2, .nparts_rhs = 2, .num_trainers = 2, .tree_init_order = false});
  s.start_epoch(0);
  auto a = s.acquire(0, {});
  auto b = s.acquire(1, {});
  REQUIRE(a.what == acquire_result::kind::bucket);
  REQUIRE(b.what == acquire_result::kind::bucket);  // the disjoint diagonal bucket
  CHECK(a.assigned.lhs != b.assigned.lhs);
  CHECK(a.assigned.rhs != b.assigned.rhs);
  CHECK(s.acquire(2, {}).what == acquire_result::kind::wait);
  // Least swap cost: after (0,0) prefer a bucket sharing a partition.
  bucket_scheduler c({.nparts_lhs = 4, .nparts_rhs = 4, .order = bucket_order::random, .seed = 5,
                      .num_trainers = 2, .tree_init_order = false});
  c.start_epoch(3);
  auto r = c.acquire(0, bucket{2, 3});  // the previous bucket itself costs nothing
  REQUIRE(r.what == acquire_result::kind::bucket);
  CHECK(r.assigned == bucket{2, 3});
  REQUIRE(c.release(0, r.assigned));
  r = c.acquire(0, bucket{2, 3});  // then one sharing a partition (cost 1)
  REQUIRE(r.what == acquire_result::kind::bucket);
  CHECK((r.assigned.lhs == 2 || r.assigned.rhs == 3));
}

TEST_CASE("a trainer dying mid-bucket: re-queued, epoch completes") {
  for (auto order : kOrders) {
    bucket_scheduler s({.nparts_lhs = 3, .nparts_rhs = 3, .order = order, .num_trainers = 2});
    s.start_epoch(0);
    auto a = s.acquire(0, {});
    REQUIRE(a.what == acquire_result::kind::bucket);
    auto died = s.trainer_died(0);
    REQUIRE(died.has_value());
    CHECK(*died == a.assigned);
    CHECK(s.allowed(a.assigned));  // locks freed, bucket pending again
    CHECK_FALSE(s.release(0, a.assigned));
    // Trainer 1 finishes the epoch alone.
    std::set<bucket> trained;
    std::optional<bucket> prev;
    for (;;) {
      auto r = s.acquire(1, prev);
      if (r.what == acquire_result::kind::done) break;
      REQUIRE(r.what == acquire_result::kind::bucket);
      CHECK(trained.insert(r.assigned).second);
      REQUIRE(s.release(1, r.assigned));
      prev = r.assigned;
    }
    CHECK(trained.size() == 9);
    CHECK(trained.contains(a.assigned));
    CHECK(s.epoch_done());
  }
}

TEST_CASE("bad configs are refused") {
  CHECK_THROWS_AS(bucket_scheduler({.nparts_lhs = 0}), std::invalid_argument);
  CHECK_THROWS_AS(bucket_scheduler({.nparts_lhs = 2, .nparts_rhs = 3, .shared_partitions = true}),
                  std::invalid_argument);
  bucket_scheduler s({.nparts_lhs = 2, .nparts_rhs = 2});
  s.start_epoch(0);
  CHECK_FALSE(s.release(0, {5, 5}));
  auto r = s.acquire(0, bucket{-1, 99});  // hostile previous is ignored
  CHECK(r.what == acquire_result::kind::bucket);
  CHECK_THROWS_AS(s.start_epoch(1), std::logic_error);
}
