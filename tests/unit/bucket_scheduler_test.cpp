// The lock server's brain (runtime/schedule/bucket_scheduler.h), driven by
// simulated trainers that follow the protocol: acquire, write back and unlock
// what the grant drops, fetch what it names, train, release. An independent
// model of the partitions' data checks every step: no partition held by two
// trainers, no fetch of a stale version, every bucket once per epoch, a dead
// trainer's lost updates re-queued.
#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <tuple>
#include <utility>
#include <stdexcept>

#include "runtime/schedule/bucket_scheduler.h"
#include "runtime/schedule/buffer_loads.h"

using namespace abg::schedule;

namespace {

constexpr bucket_order kOrders[] = {bucket_order::random, bucket_order::affinity, bucket_order::inside_out,
                                    bucket_order::outside_in};

// The world as the partitions' data sees it, kept apart from the scheduler.
struct model {
  scheduler_config cfg;
  std::set<part_key> init;
  part_key k(int side, int part) const { return {cfg.shared_partitions ? 0 : side, part}; }
  bool lockable(int side) const {
    return (cfg.shared_partitions ? cfg.nparts_lhs : (side == 0 ? cfg.nparts_lhs : cfg.nparts_rhs)) > 1;
  }
  std::vector<part_key> parts(bucket b) const {
    std::vector<part_key> out;
    if (lockable(0)) out.push_back(k(0, b.lhs));
    if (lockable(1) && (out.empty() || out[0] != k(1, b.rhs))) out.push_back(k(1, b.rhs));
    return out;
  }
  explicit model(scheduler_config c) : cfg(c) {
    init.insert(k(0, 0));
    init.insert(k(1, 0));
  }
  // The partition servers' copies and the trainers' in-memory copies, as versions.
  std::map<part_key, uint64_t> server;
  struct trainer {
    std::map<part_key, uint64_t> holds;  // partition -> version it started from
    std::optional<bucket> training;
    // Several trainers with a buffer: the reserved next bucket, and what was
    // read ahead for it (at the version the grant named).
    std::optional<bucket> next;
    std::map<part_key, uint64_t> ahead;
    std::set<part_key> awaited; // of the next bucket, held by others, handed over when written back
    // Dropped by a grant and still being written back (its I/O runs on
    // beside the next kernels): partition -> the version it writes.
    std::map<part_key, uint64_t> writing;
  };
  std::map<trainer_id, trainer> trainers;
};

// Partitions handed over to reservations that awaited them, in every simulate() so far.
std::size_t handed_over = 0;

// Write-backs that ended while others were running, in every simulate() so far.
std::size_t late_unlocks = 0;

// Drives one scheduler with `n` trainers in a random interleaving, checking
// every rule at every step; with `pauses`, paused and resumed at random (an
// admin console's pause, a commit mid-epoch); with `late_writes`, a bucket
// grant's write-back ends at a random later step, after the trainer went on
// to train, release and acquire (its I/O runs on beside the next kernels).
void simulate(scheduler_config cfg, int epochs, uint64_t seed, bool pauses = false, bool late_writes = false) {
  bucket_scheduler s(cfg);
  model m(cfg);
  std::mt19937_64 rng(seed);
  for (int e = 0; e < epochs; ++e) {
    s.set_paused(false);
    s.start_epoch(e);
    std::map<bucket, int> trained;
    std::set<trainer_id> parked; // told to wait, not asked again yet
    int steps = 0;
    while (!s.epoch_done()) {
      REQUIRE(++steps < 200000);
      // The lock server asks a parked trainer on its own unless it holds
      // nothing: those all see the same grid, so after one is told to wait
      // the others are not asked.
      for (auto p : parked) CHECK((s.waits_alone(p) || s.held(p).empty()));
      if (pauses && rng() % (s.paused() ? 8 : 64) == 0) s.set_paused(!s.paused());
      auto t = static_cast<trainer_id>(rng() % static_cast<uint64_t>(cfg.num_trainers));
      auto& tr = m.trainers[t];
      // Written back partitions a reservation awaited are locked for it,
      // at the version written; its trainer reads them ahead.
      auto read_handed = [&] {
        for (auto& [other, o] : m.trainers)
          for (const auto& h : s.take_handed(other)) {
            CHECK(o.awaited.erase(h.key) == 1);
            ++handed_over;
            CHECK(h.version == m.server[h.key]);
            o.ahead[h.key] = h.version;
          }
      };
      if (!tr.writing.empty() && rng() % 3 == 0) {
        auto it = std::next(tr.writing.begin(), static_cast<std::ptrdiff_t>(rng() % tr.writing.size()));
        const part_version w{it->first, it->second};
        REQUIRE(s.unlock(t, {w}));
        CHECK_FALSE(s.writing(w.key));
        m.server[w.key] = w.version;
        tr.writing.erase(it);
        ++late_unlocks;
        read_handed();
        continue;
      }
      if (tr.training) {
        bucket b = *tr.training;
        REQUIRE(s.release(t, b));
        CHECK_FALSE(s.release(t, b));  // double release refused
        tr.training.reset();
        ++trained[b];
        m.init.insert(m.k(0, b.lhs));
        m.init.insert(m.k(1, b.rhs));
        continue;
      }
      // The choice is the reference rule's, a plain scan of the whole order:
      // the first allowed bucket, or with several trainers the first of least
      // swap cost (partitions it does not hold); a reserved bucket first,
      // unless a partition it awaits was not handed over: then the scan's
      // bucket, and if there is none it waits for the handover.
      CHECK(s.reserved(t) == tr.next);
      const bool paused = s.paused();
      std::optional<bucket> reference = tr.awaited.empty() && !paused ? tr.next : std::nullopt;
      const bool awaiting = tr.next && !tr.awaited.empty();
      if (!reference && !paused) {
        auto have = s.held(t);
        if (awaiting)
          for (auto& [k, v] : tr.ahead) have.erase(k);  // given back with the reservation
        int best_cost = 3;
        for (const auto& b : s.order()) {
          if (!s.allowed(b, t)) continue;
          int cost = 0;
          for (const auto& k : s.partitions_of(b)) cost += have.contains(k) ? 0 : 1;
          if (cfg.num_trainers == 1 || cost < best_cost) {
            reference = b;
            best_cost = cost;
          }
          if (cfg.num_trainers == 1 || cost == 0) break;
        }
      }
      // Its own write-back running: one trainer's order waits for a
      // partition being written; several wait rather than drop what they hold.
      bool waits_for_write = false;
      if (!tr.writing.empty() && !(tr.next && tr.awaited.empty() && !paused)) {
        if (cfg.num_trainers == 1 && reference)
          for (const auto& k : s.partitions_of(*reference)) waits_for_write = waits_for_write || tr.writing.contains(k);
        if (!reference && !awaiting) waits_for_write = true;
        if (waits_for_write) reference.reset();
      }
      auto g = s.acquire(t);
      if (waits_for_write) CHECK(g.what == grant::kind::wait);
      if (g.what == grant::kind::wait)
        parked.insert(t);
      else
        parked.erase(t);
      CHECK((g.what == grant::kind::bucket) == reference.has_value());
      if (reference && g.what == grant::kind::bucket) CHECK(g.assigned == *reference);
      if (paused || (awaiting && g.what == grant::kind::bucket)) {
        // Its reservation went back (paused, or another bucket could go; the
        // new grant may reserve that bucket again): what was locked or
        // handed over for it is nobody's now.
        tr.next.reset();
        tr.ahead.clear();
        tr.awaited.clear();
      }
      // What is dropped is what the trainer holds, and it is written back before anything else.
      std::vector<part_version> written;
      for (auto& k : g.drop) {
        REQUIRE(tr.holds.contains(k));
        written.push_back({k, tr.holds[k] + 1});
      }
      for (auto& k : g.drop) CHECK(s.writing(k));
      if (!written.empty() && late_writes && g.what == grant::kind::bucket && rng() % 2 == 0) {
        for (auto& w : written) {
          tr.holds.erase(w.key);
          tr.writing[w.key] = w.version;
        }
      } else if (!written.empty()) {
        REQUIRE(s.unlock(t, written));
        CHECK_FALSE(s.unlock(t, written));  // not held any more
        for (auto& w : written) {
          m.server[w.key] = w.version;
          tr.holds.erase(w.key);
        }
        read_handed();
      }
      if (g.what == grant::kind::wait && !tr.writing.empty()) continue;  // may hold what it goes on with
      if (g.what == grant::kind::wait || g.what == grant::kind::drop) {
        // Nothing held, or (waiting for a handover) only its reserved bucket's partitions.
        if (awaiting) CHECK(s.reserved(t) == tr.next);
        for (auto& [k, v] : tr.holds) CHECK((tr.next && std::ranges::count(m.parts(*tr.next), k) == 1));
        continue;
      }
      const bucket b = g.assigned;
      CHECK(g.epoch == e);
      // A reservation's partitions are fetched at the versions read ahead.
      if (tr.next) {
        CHECK(g.fetch.size() == tr.ahead.size());
        for (auto& f : g.fetch) CHECK((tr.ahead.contains(f.key) && tr.ahead[f.key] == f.version));
      }
      tr.next.reset();
      tr.ahead.clear();
      tr.awaited.clear();
      // First-epoch rule.
      if (e == 0 && cfg.tree_init_order) CHECK((m.init.contains(m.k(0, b.lhs)) || m.init.contains(m.k(1, b.rhs))));
      // Never fetched stale: the version asked for is the newest written back,
      // and nobody else holds a newer copy in memory.
      for (auto& f : g.fetch) {
        CHECK_FALSE(tr.holds.contains(f.key));
        CHECK(f.version == (m.server.contains(f.key) ? m.server[f.key] : 1));
        for (auto& [other, o] : m.trainers) {
          CHECK_FALSE(o.writing.contains(f.key));
          if (other != t) CHECK_FALSE((o.holds.contains(f.key) || o.ahead.contains(f.key)));
        }
        tr.holds[f.key] = f.version;
      }
      // What it reads ahead is its next bucket's, reserved: at the newest
      // version, in nobody's hands, never more than the buffer's room.
      // (One trainer reads ahead on hints, checked apart, and reserves nothing.)
      if (cfg.num_trainers == 1) CHECK_FALSE(s.reserved(t));
      if (cfg.num_trainers > 1 && (!g.ahead.empty() || s.reserved(t))) {
        REQUIRE(s.reserved(t));
        tr.next = s.reserved(t);
        CHECK(*tr.next != b);
        CHECK_FALSE(s.allowed(*tr.next, t));  // nobody's but this trainer's
        for (auto& a : g.ahead) {
          CHECK_FALSE(tr.holds.contains(a.key));
          CHECK(a.version == (m.server.contains(a.key) ? m.server[a.key] : 1));
          for (auto& [other, o] : m.trainers) {
            CHECK_FALSE(o.writing.contains(a.key));
            if (other != t) CHECK_FALSE((o.holds.contains(a.key) || o.ahead.contains(a.key)));
          }
          tr.ahead[a.key] = a.version;
        }
        // Awaited: held by another trainer now, or being written back by
        // anyone, and by nobody else's reservation.
        for (auto& k : g.awaited) {
          CHECK_FALSE(tr.holds.contains(k));
          int holders = 0;
          for (auto& [other, o] : m.trainers) {
            holders += o.writing.contains(k) ? 1 : 0;
            if (other == t) continue;
            holders += o.holds.contains(k) ? 1 : 0;
            CHECK_FALSE(o.awaited.contains(k));
            CHECK_FALSE(o.ahead.contains(k));
          }
          CHECK(holders == 1);
          tr.awaited.insert(k);
        }
        for (auto& k : m.parts(*tr.next))
          CHECK((tr.holds.contains(k) || tr.ahead.contains(k) || tr.awaited.contains(k)));
      }
      // The trainer now holds the bucket's partitions: those alone, or with
      // a buffer (one trainer) others too, never more than it has room for;
      // several trainers keep besides them those of their reserved bucket.
      auto parts = m.parts(b);
      for (auto& k : parts) CHECK(tr.holds.contains(k));
      if (cfg.buffer_capacity > 0)
        CHECK(tr.holds.size() + tr.ahead.size() <= static_cast<std::size_t>(std::max<int32_t>(cfg.buffer_capacity, 1)));
      if (cfg.num_trainers > 1 || cfg.buffer_capacity == 0)
        for (auto& [k, v] : tr.holds)
          CHECK((std::find(parts.begin(), parts.end(), k) != parts.end() ||
                 (tr.next && std::ranges::count(m.parts(*tr.next), k) == 1)));
      std::set<part_key> holds;
      for (auto& [k, v] : tr.holds) holds.insert(k);
      for (auto& [k, v] : tr.ahead) holds.insert(k);
      CHECK(s.held(t) == holds);
      // No partition in two trainers' hands (read ahead included).
      std::map<part_key, int> owners;
      for (auto& [id, o] : m.trainers) {
        for (auto& [k, v] : o.holds) ++owners[k];
        for (auto& [k, v] : o.ahead) ++owners[k];
        for (auto& [k, v] : o.writing) ++owners[k];
      }
      for (auto& [k, c] : owners) CHECK(c == 1);
      tr.training = b;
    }
    CHECK(trained.size() == s.num_buckets());
    for (const auto& [b, c] : trained) CHECK(c == 1);
    for (auto& [id, tr] : m.trainers) {
      CHECK(tr.holds.empty());
      CHECK(tr.writing.empty());
    }
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
  CHECK(parse_bucket_order("buffer") == bucket_order::buffer);
  CHECK(to_string(bucket_order::buffer) == "buffer");
}

TEST_CASE("every bucket once per epoch, no shared partition, no stale fetch") {
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
          for (int32_t capacity : {2, 3, 5}) {
            CAPTURE(capacity);
            cfg.buffer_capacity = capacity;
            simulate(cfg, 3, ++seed);
            simulate(cfg, 2, ++seed, true);
            simulate(cfg, 2, ++seed, true, true);
            if (nl > 1 && nr > 1) {
              cfg.order = bucket_order::buffer;
              simulate(cfg, 3, ++seed);
              cfg.order = order;
            }
          }
        }
  // Reservations did await partitions and got them handed over (several trainers, room for two buckets).
  MESSAGE(handed_over << " partitions handed over to the reservations awaiting them");
  CHECK(handed_over > 100);
  // Write-backs did end after their trainers went on.
  MESSAGE(late_unlocks << " write-backs ended after their trainer went on");
  CHECK(late_unlocks > 100);
}

// Trainer 0 writes back what grant `g` drops, each partition changed.
void write_back_dropped(bucket_scheduler& s, const grant& g, std::set<part_key>& holds) {
  std::vector<part_version> written;
  for (auto& k : g.drop) {
    REQUIRE(holds.erase(k) == 1);
    written.push_back({k, s.version(k) + 1});
  }
  if (!written.empty()) REQUIRE(s.unlock(0, written));
}

// One trainer through two epochs of `cfg`: the partitions it fetches in the
// second (no first-epoch rule), checking on the way that it never holds more
// than the buffer and is never told to write back what its bucket needs.
std::int64_t loads_of_second_epoch(scheduler_config cfg) {
  bucket_scheduler s(cfg);
  std::int64_t loads = 0;
  for (int e = 0; e < 2; ++e) {
    s.start_epoch(e);
    loads = 0;
    std::set<part_key> holds;
    std::set<bucket> trained;
    for (int steps = 0; !s.epoch_done(); ++steps) {
      REQUIRE(steps < 100000);
      auto g = s.acquire(0);
      write_back_dropped(s, g, holds);
      if (g.what != grant::kind::bucket) continue;
      const auto parts = s.partitions_of(g.assigned);
      for (auto& k : parts) CHECK(std::find(g.drop.begin(), g.drop.end(), k) == g.drop.end());
      for (auto& f : g.fetch) CHECK(holds.insert(f.key).second);
      loads += static_cast<std::int64_t>(g.fetch.size());
      // What it holds and what it reads ahead fit the buffer together.
      CHECK(holds.size() <= static_cast<std::size_t>(s.planned_capacity()));
      CHECK(holds.size() + g.ahead.size() <= static_cast<std::size_t>(cfg.buffer_capacity));
      for (auto& a : g.ahead) CHECK_FALSE(holds.contains(a.key));
      CHECK(trained.insert(g.assigned).second);
      REQUIRE(s.release(0, g.assigned));
    }
    CHECK(trained.size() == s.num_buckets());
  }
  return loads;
}

TEST_CASE("a buffer: one trainer keeps the partitions needed soonest, as few loads as the order allows") {
  for (auto [n, shared] : {std::pair{16, true}, {8, false}, {5, true}, {6, false}})
    for (int32_t capacity : {2, 3, 4, 6})
      for (auto order : {bucket_order::inside_out, bucket_order::outside_in, bucket_order::buffer}) {
        CAPTURE(n);
        CAPTURE(shared);
        CAPTURE(capacity);
        CAPTURE(to_string(order));
        scheduler_config cfg{.nparts_lhs = n, .nparts_rhs = n, .order = order, .seed = 5,
                             .shared_partitions = shared, .buffer_capacity = capacity};
        const auto loads = loads_of_second_epoch(cfg);
        bucket_scheduler probe(cfg);
        probe.start_epoch(1);
        // Belady's rule over the order: the fewest loads any eviction could
        // give it, in the capacity left beside the read-ahead slot.
        CHECK(probe.planned_capacity() == (capacity >= 3 ? capacity - 1 : capacity));
        CHECK(loads == count_loads(probe.order(), probe.planned_capacity(), shared, eviction::needed_last));
      }
  // The figure: 16 partitions, a buffer of 4 (3 planned, one read
  // ahead), at most 60% of PBG's best order with LRU at 4 (affinity's 118).
  scheduler_config cfg{.nparts_lhs = 16, .nparts_rhs = 16, .order = bucket_order::buffer, .seed = 5,
                       .shared_partitions = true, .buffer_capacity = 4};
  CHECK(loads_of_second_epoch(cfg) == 65);
  CHECK(65 * 10 <= 118 * 6);
  // The buffer order needs a capacity.
  CHECK_THROWS_AS(bucket_scheduler({.nparts_lhs = 4, .nparts_rhs = 4, .order = bucket_order::buffer}),
                  std::invalid_argument);
  CHECK_THROWS_AS(make_bucket_order(4, 4, bucket_order::buffer, 0), std::invalid_argument);
}

TEST_CASE("a buffer reads ahead: each grant names what the next one fetches, in the slot left free") {
  for (auto [n, shared, capacity] : {std::tuple{16, true, 4}, {8, false, 3}, {6, false, 5}})
    for (auto order : {bucket_order::inside_out, bucket_order::buffer}) {
      CAPTURE(n);
      CAPTURE(capacity);
      CAPTURE(to_string(order));
      bucket_scheduler s({.nparts_lhs = n, .nparts_rhs = n, .order = order, .seed = 5, .shared_partitions = shared,
                          .tree_init_order = false, .buffer_capacity = capacity});
      REQUIRE(s.read_ahead_slots() == 1);
      s.start_epoch(0);
      std::vector<part_version> announced;
      std::int64_t loads = 0, read_ahead = 0, loading = 0, loading_read_ahead = 0;
      bool first = true;
      std::set<part_key> holds;
      while (!s.epoch_done()) {
        auto g = s.acquire(0);
        write_back_dropped(s, g, holds);
        if (g.what != grant::kind::bucket) {
          CHECK(announced.empty());  // nothing announced after the last bucket
          continue;
        }
        const auto before = read_ahead;
        for (auto& f : g.fetch) {
          holds.insert(f.key);
          ++loads;
          // Read ahead at the version announced, or at the one its write-back
          // by the announcing grant gave it.
          read_ahead += std::any_of(announced.begin(), announced.end(), [&](const part_version& a) {
            return a.key == f.key && (a.version == f.version || a.version + 1 == f.version);
          });
        }
        if (!g.fetch.empty() && !std::exchange(first, false)) {
          ++loading;
          loading_read_ahead += read_ahead > before;
        }
        // Every hint is a load of the next grant (one trainer: the order alone decides).
        for (auto& a : announced)
          CHECK(std::any_of(g.fetch.begin(), g.fetch.end(), [&](const part_version& f) {
            return f.key == a.key && f.version >= a.version;
          }));
        announced = g.ahead;
        CHECK(holds.size() + g.ahead.size() <= static_cast<std::size_t>(capacity));
        REQUIRE(s.release(0, g.assigned));
      }
      // Every bucket that loads, but the first, finds one of its loads read
      // ahead (one slot: a bucket needing two new partitions waits for one).
      MESSAGE(read_ahead << " of " << loads << " loads read ahead");
      CHECK(loading_read_ahead == loading);
      if (order == bucket_order::buffer) CHECK(read_ahead * 10 >= loads * 8);
    }
  // No read-ahead slot: no room beside a bucket (several trainers: for two buckets).
  CHECK(bucket_scheduler({.nparts_lhs = 8, .nparts_rhs = 8, .num_trainers = 2, .buffer_capacity = 3})
          .read_ahead_slots() == 0);
  CHECK(bucket_scheduler({.nparts_lhs = 8, .nparts_rhs = 8, .num_trainers = 2, .buffer_capacity = 4})
          .read_ahead_slots() == 2);
  CHECK(bucket_scheduler({.nparts_lhs = 8, .nparts_rhs = 1, .num_trainers = 2, .buffer_capacity = 2})
          .read_ahead_slots() == 1);
  CHECK(bucket_scheduler({.nparts_lhs = 8, .nparts_rhs = 8, .buffer_capacity = 2}).read_ahead_slots() == 0);
  CHECK(bucket_scheduler({.nparts_lhs = 8, .nparts_rhs = 8}).read_ahead_slots() == 0);
}

// Several trainers with a buffer (docs/actors.md, "Scheduler rules"): each
// grant reserves the trainer's next bucket, so what it reads ahead is locked
// for it; the next grant is that bucket and finds every load read ahead.
TEST_CASE("several trainers read ahead: a grant reserves the next bucket, whose loads are then all read ahead") {
  for (auto [n, shared, trainers] : {std::tuple{8, true, 2}, {8, false, 2}, {16, false, 4}}) {
    CAPTURE(n);
    CAPTURE(shared);
    CAPTURE(trainers);
    bucket_scheduler s({.nparts_lhs = n, .nparts_rhs = n, .seed = 3, .shared_partitions = shared,
                        .num_trainers = trainers, .tree_init_order = false, .buffer_capacity = 4});
    REQUIRE(s.read_ahead_slots() == 2);
    s.start_epoch(0);
    std::map<trainer_id, std::set<part_key>> holds;
    std::map<trainer_id, std::vector<part_version>> announced;
    std::map<trainer_id, bucket> training;
    std::int64_t loads = 0, read_ahead = 0, first_loads = 0;
    std::set<bucket> trained;
    for (int steps = 0; !s.epoch_done(); ++steps) {
      REQUIRE(steps < 100000);
      const auto t = static_cast<trainer_id>(steps % trainers);
      if (auto b = training.find(t); b != training.end()) {
        REQUIRE(s.release(t, b->second));
        training.erase(b);
        continue;
      }
      const auto reserved_bucket = s.reserved(t);
      auto g = s.acquire(t);
      std::vector<part_version> written;
      for (auto& k : g.drop) {
        REQUIRE(holds[t].erase(k) == 1);
        written.push_back({k, s.version(k) + 1});
      }
      if (!written.empty()) {
        REQUIRE(s.unlock(t, written));
        // What a reservation awaited is handed over as written back, and read ahead.
        for (trainer_id o = 0; o < static_cast<trainer_id>(trainers); ++o)
          for (const auto& h : s.take_handed(o)) announced[o].push_back(h);
      }
      if (g.what != grant::kind::bucket) {
        // A reservation is granted, or waits for what it awaits.
        if (reserved_bucket) CHECK(s.reserved(t) == reserved_bucket);
        continue;
      }
      // Taken unless it awaited a partition not handed over yet and another bucket could go.
      const bool reserved = reserved_bucket && g.assigned == *reserved_bucket;
      for (auto& f : g.fetch) {
        CHECK(holds[t].insert(f.key).second);
        ++loads;
        const auto& a = announced[t];
        read_ahead += std::ranges::count(a, f);
      }
      if (!reserved) first_loads += static_cast<std::int64_t>(g.fetch.size());
      // With a reservation, every load was read ahead at the version fetched.
      if (reserved) CHECK(g.fetch.size() == announced[t].size());
      announced[t] = g.ahead;
      CHECK(holds[t].size() + g.ahead.size() <= 4);
      CHECK(trained.insert(g.assigned).second);
      training[t] = g.assigned;
    }
    CHECK(trained.size() == s.num_buckets());
    // Every load but those of a trainer's grants without a reservation (its
    // first, and any after it found no next bucket) was read ahead.
    MESSAGE(read_ahead << " of " << loads << " loads read ahead");
    CHECK(read_ahead == loads - first_loads);
    CHECK(read_ahead * 10 >= loads * 8);
  }
}

TEST_CASE("several trainers: a reservation is nobody else's, goes back when paused or when its trainer dies") {
  bucket_scheduler s({.nparts_lhs = 4, .nparts_rhs = 4, .shared_partitions = true, .num_trainers = 2,
                      .tree_init_order = false, .buffer_capacity = 4});
  s.start_epoch(0);
  auto a = s.acquire(0);
  REQUIRE(a.what == grant::kind::bucket);
  REQUIRE(s.reserved(0));
  const auto next = *s.reserved(0);
  CHECK_FALSE(s.allowed(next, 1));
  // The reserved partitions are locked for trainer 0 but were never fetched:
  // unlocking one is refused.
  REQUIRE_FALSE(a.ahead.empty());
  CHECK_FALSE(s.unlock(0, {a.ahead[0]}));
  // Trainer 1 gets a bucket apart from both.
  auto b = s.acquire(1);
  REQUIRE(b.what == grant::kind::bucket);
  for (auto& k : s.partitions_of(b.assigned)) {
    CHECK(std::ranges::count(s.partitions_of(a.assigned), k) == 0);
    CHECK(std::ranges::count(s.partitions_of(next), k) == 0);
  }
  // Paused: trainer 0's next acquire drops what it holds; the reservation goes back.
  REQUIRE(s.release(0, a.assigned));
  s.set_paused(true);
  auto d = s.acquire(0);
  REQUIRE(d.what == grant::kind::drop);
  CHECK_FALSE(s.reserved(0));
  for (auto& r : a.ahead) CHECK(std::ranges::count(d.drop, r.key) == 0);  // never fetched, not written back
  std::vector<part_version> written;
  for (auto& k : d.drop) written.push_back({k, s.version(k) + 1});
  REQUIRE(s.unlock(0, written));
  CHECK(s.held(0).empty());
  s.set_paused(false);
  // Trainer 1 dies with its reservation: its bucket and the reserved one are pending again.
  REQUIRE(s.reserved(1));
  const auto lost = *s.reserved(1);
  auto requeued = s.trainer_died(1);
  CHECK(requeued == std::vector<bucket>{b.assigned});
  CHECK_FALSE(s.reserved(1));
  CHECK(s.allowed(lost, 0));
  CHECK(s.allowed(next, 0));
  // The epoch completes with trainer 0 alone.
  std::set<part_key> holds;
  for (int steps = 0; !s.epoch_done(); ++steps) {
    REQUIRE(steps < 1000);
    auto g = s.acquire(0);
    written.clear();
    for (auto& k : g.drop) {
      REQUIRE(holds.erase(k) == 1);
      written.push_back({k, s.version(k) + 1});
    }
    if (!written.empty()) REQUIRE(s.unlock(0, written));
    if (g.what != grant::kind::bucket) continue;
    for (auto& f : g.fetch) holds.insert(f.key);
    REQUIRE(s.release(0, g.assigned));
  }
  CHECK(s.num_released() == s.num_buckets());
}

TEST_CASE("one trainer follows bucket_order exactly and keeps the partitions it goes on with") {
  for (auto order : kOrders) {
    // After the first epoch (no init rule), the order is exactly bucket_order.
    scheduler_config cfg{.nparts_lhs = 4, .nparts_rhs = 4, .order = order, .seed = 11, .shared_partitions = true};
    bucket_scheduler s(cfg);
    for (int e = 0; e < 3; ++e) {
      s.start_epoch(e);
      std::vector<bucket> got;
      std::map<part_key, uint64_t> held;
      for (int guard = 0; guard < 100 && !s.epoch_done(); ++guard) {
        auto g = s.acquire(0);
        std::vector<part_version> written;
        for (auto& k : g.drop) written.push_back({k, held[k] + 1});
        REQUIRE(s.unlock(0, written));
        for (auto& k : g.drop) held.erase(k);
        if (g.what != grant::kind::bucket) continue;
        // Only what it lacks is fetched: consecutive buckets sharing a partition keep it.
        for (auto& f : g.fetch) {
          CHECK_FALSE(held.contains(f.key));
          held[f.key] = f.version;
        }
        if (!got.empty() && (got.back().lhs == g.assigned.lhs || got.back().lhs == g.assigned.rhs))
          CHECK(std::none_of(g.fetch.begin(), g.fetch.end(),
                             [&](const part_version& f) { return f.key.part == got.back().lhs; }));
        got.push_back(g.assigned);
        REQUIRE(s.release(0, g.assigned));
      }
      REQUIRE(s.epoch_done());
      if (e > 0 || order == bucket_order::inside_out) CHECK(got == s.order());
      CHECK(got.size() == 16);
    }
  }
}

TEST_CASE("first-epoch rule") {
  scheduler_config cfg{.nparts_lhs = 3, .nparts_rhs = 3, .order = bucket_order::outside_in, .num_trainers = 2};
  bucket_scheduler s(cfg);
  s.start_epoch(0);
  CHECK(s.allowed({0, 2}, 0));
  CHECK(s.allowed({2, 0}, 0));
  CHECK_FALSE(s.allowed({2, 2}, 0));
  CHECK_FALSE(s.allowed({1, 2}, 0));
  // outside_in starts at (2,2), which is not allowed: the first bucket has partition 0.
  auto r = s.acquire(0);
  REQUIRE(r.what == grant::kind::bucket);
  CHECK((r.assigned.lhs == 0 || r.assigned.rhs == 0));
  // Later epochs have no rule.
  bucket_scheduler u(cfg);
  u.start_epoch(1);
  CHECK(u.allowed({2, 2}, 0));
}

TEST_CASE("two trainers: a partition one holds is not granted to the other until written back") {
  bucket_scheduler s({.nparts_lhs = 2, .nparts_rhs = 2, .num_trainers = 2, .tree_init_order = false});
  s.start_epoch(0);
  auto a = s.acquire(0);
  auto b = s.acquire(1);
  REQUIRE(a.what == grant::kind::bucket);
  REQUIRE(b.what == grant::kind::bucket);  // the disjoint diagonal bucket
  CHECK(a.assigned.lhs != b.assigned.lhs);
  CHECK(a.assigned.rhs != b.assigned.rhs);
  // Released but not written back: still held, so the other trainer waits.
  REQUIRE(s.release(0, a.assigned));
  REQUIRE(s.release(1, b.assigned));
  CHECK(s.held(0).size() == 2);
  auto again = s.acquire(1);
  // Trainer 1 may not take trainer 0's partitions: it must drop its own and wait.
  CHECK(again.what == grant::kind::drop);
  CHECK(again.drop.size() == 2);
  // A version older than the recorded one is refused, as is a partition not held.
  CHECK_FALSE(s.unlock(1, {{again.drop[0], 0}}));
  CHECK_FALSE(s.unlock(1, {{{0, a.assigned.lhs}, 2}}));
  REQUIRE(s.unlock(1, {{again.drop[0], 2}, {again.drop[1], 2}}));
  CHECK(s.acquire(1).what == grant::kind::wait);
  // Trainer 0 goes on with a bucket sharing its lhs partition: nothing fetched for it.
  auto next = s.acquire(0);
  REQUIRE(next.what == grant::kind::bucket);
  CHECK(next.drop.size() == 1);
  CHECK(next.fetch.size() == 1);
  // The fetched one was written back by trainer 1 as version 2.
  CHECK(next.fetch[0].version == 2);
  // The partitions of the bucket being trained cannot be unlocked.
  CHECK_FALSE(s.unlock(0, {{next.fetch[0].key, 3}}));
}

TEST_CASE("a partition written back unchanged keeps its version") {
  // A whole epoch whose buckets change nothing (no edges): every partition is
  // unlocked at the version it had, and the epoch completes.
  bucket_scheduler s({.nparts_lhs = 2, .nparts_rhs = 2, .shared_partitions = true});
  s.reset(5);
  s.start_epoch(0);
  std::size_t unlocked = 0;
  for (int guard = 0; guard < 100 && !s.epoch_done(); ++guard) {
    auto g = s.acquire(0);
    std::vector<part_version> same;
    for (auto& k : g.drop) same.push_back({k, s.version(k)});
    REQUIRE(s.unlock(0, same));
    unlocked += same.size();
    if (g.what == grant::kind::bucket) REQUIRE(s.release(0, g.assigned));
  }
  CHECK(s.epoch_done());
  CHECK(unlocked >= 2);
  for (int32_t part = 0; part < 2; ++part) CHECK(s.version({0, part}) == 5);
}

TEST_CASE("a trainer dying: its bucket and its unsaved buckets re-queued, locks freed, epoch completes") {
  for (auto order : kOrders) {
    CAPTURE(to_string(order));
    bucket_scheduler s({.nparts_lhs = 3, .nparts_rhs = 3, .order = order, .shared_partitions = true, .num_trainers = 2});
    s.start_epoch(0);
    // Trainer 0 trains two buckets without writing back in between (they
    // share a partition), then dies during a third.
    std::vector<bucket> done0;
    std::map<part_key, uint64_t> held;
    std::vector<bucket> requeued;
    for (int k = 0; k < 3; ++k) {
      auto g = s.acquire(0);
      if (g.what != grant::kind::bucket) break;
      std::vector<part_version> written;
      for (auto& d : g.drop) written.push_back({d, held[d] + 1});
      REQUIRE(s.unlock(0, written));
      for (auto& d : g.drop) held.erase(d);
      for (auto& f : g.fetch) held[f.key] = f.version;
      if (k < 2) {
        REQUIRE(s.release(0, g.assigned));
        done0.push_back(g.assigned);
      }
    }
    auto active = s.active(0);
    requeued = s.trainer_died(0);
    CHECK(s.held(0).empty());
    // The current bucket first, then every released bucket of trainer 0 with a partition never written back.
    if (active) CHECK(requeued.front() == *active);
    for (auto& b : done0) {
      auto parts = s.partitions_of(b);
      bool lost = std::any_of(parts.begin(), parts.end(), [&](const part_key& p) { return held.contains(p); });
      CHECK(lost == (std::find(requeued.begin(), requeued.end(), b) != requeued.end()));
    }
    CHECK_FALSE(s.release(0, requeued.empty() ? bucket{} : requeued.front()));
    // Trainer 1 finishes the epoch alone.
    std::set<bucket> trained(done0.begin(), done0.end());
    for (auto& b : requeued) trained.erase(b);
    std::map<part_key, uint64_t> held1;
    for (int guard = 0; guard < 100 && !s.epoch_done(); ++guard) {
      auto g = s.acquire(1);
      std::vector<part_version> written;
      for (auto& d : g.drop) written.push_back({d, s.version(d) + 1});
      REQUIRE(s.unlock(1, written));
      if (g.what != grant::kind::bucket) continue;
      CHECK(trained.insert(g.assigned).second);
      REQUIRE(s.release(1, g.assigned));
    }
    CHECK(s.epoch_done());
    CHECK(trained.size() == 9);
  }
}

TEST_CASE("reset forgets every lock and starts every partition at the seeded version") {
  bucket_scheduler s({.nparts_lhs = 2, .nparts_rhs = 2, .num_trainers = 2});
  s.start_epoch(0);
  auto g = s.acquire(0);
  REQUIRE(g.what == grant::kind::bucket);
  CHECK_THROWS_AS(s.start_epoch(1), std::logic_error);  // partitions still held
  s.reset(uint64_t{7} << 32);
  CHECK(s.held(0).empty());
  CHECK_FALSE(s.epoch_started());
  CHECK(s.acquire(0).what == grant::kind::wait);
  s.start_epoch(3);
  auto h = s.acquire(0);
  REQUIRE(h.what == grant::kind::bucket);
  for (auto& f : h.fetch) CHECK(f.version == uint64_t{7} << 32);
}

TEST_CASE("bad configs and hostile arguments are refused") {
  CHECK_THROWS_AS(bucket_scheduler({.nparts_lhs = 0}), std::invalid_argument);
  CHECK_THROWS_AS(bucket_scheduler({.nparts_lhs = 2, .nparts_rhs = 3, .shared_partitions = true}),
                  std::invalid_argument);
  bucket_scheduler s({.nparts_lhs = 2, .nparts_rhs = 2});
  s.start_epoch(0);
  CHECK_FALSE(s.release(0, {5, 5}));
  CHECK_FALSE(s.allowed({-1, 99}, 0));
  CHECK_FALSE(s.unlock(0, {{{1, 9}, 5}}));
  auto r = s.acquire(0);
  CHECK(r.what == grant::kind::bucket);
  // A partition listed twice in one unlock is refused as a whole.
  REQUIRE(s.release(0, r.assigned));
  auto n = s.acquire(0);
  if (!n.drop.empty()) CHECK_FALSE(s.unlock(0, {{n.drop[0], 9}, {n.drop[0], 10}}));
}

TEST_CASE("paused: no bucket handed out, what is held written back, drained; resumed the epoch goes on") {
  bucket_scheduler s({.nparts_lhs = 3, .nparts_rhs = 3, .num_trainers = 2, .tree_init_order = false});
  s.start_epoch(0);
  auto a = s.acquire(0);
  auto b = s.acquire(1);
  REQUIRE(a.what == grant::kind::bucket);
  REQUIRE(b.what == grant::kind::bucket);
  s.set_paused(true);
  CHECK(s.paused());
  CHECK_FALSE(s.drained());
  // A trainer's retry still gets the bucket it trains.
  CHECK(s.acquire(0).assigned == a.assigned);
  REQUIRE(s.release(0, a.assigned));
  // Nothing new: write back and unlock, then wait.
  auto d = s.acquire(0);
  REQUIRE(d.what == grant::kind::drop);
  std::vector<part_version> written;
  for (auto& k : d.drop) written.push_back({k, 2});
  REQUIRE(s.unlock(0, written));
  CHECK(s.acquire(0).what == grant::kind::wait);
  CHECK_FALSE(s.drained());  // trainer 1 still trains
  REQUIRE(s.release(1, b.assigned));
  auto d1 = s.acquire(1);
  REQUIRE(d1.what == grant::kind::drop);
  written.clear();
  for (auto& k : d1.drop) written.push_back({k, 2});
  REQUIRE(s.unlock(1, written));
  CHECK(s.drained());
  CHECK(s.num_released() == 2);
  CHECK_FALSE(s.epoch_done());
  // Pausing survives a reset (a rollback while paused stays paused).
  s.set_paused(false);
  auto g = s.acquire(0);
  CHECK(g.what == grant::kind::bucket);
  CHECK(g.assigned != a.assigned);
  CHECK(g.assigned != b.assigned);
  s.set_paused(true);
  s.reset(3);
  CHECK(s.paused());
  s.start_epoch(1);
  CHECK(s.acquire(0).what == grant::kind::wait);
}

TEST_CASE("an epoch started with buckets done before a mid-epoch commit trains only the others") {
  for (auto order : kOrders) {
    scheduler_config cfg{.nparts_lhs = 4, .nparts_rhs = 4, .order = order, .num_trainers = 1};
    bucket_scheduler s(cfg);
    // The first epoch's rule counts the partitions of the done buckets as initialised.
    const std::vector<bucket> done{{0, 0}, {0, 3}, {3, 3}};
    s.start_epoch(0, done);
    CHECK(s.num_released() == done.size());
    for (auto& b : done) CHECK_FALSE(s.allowed(b, 0));
    CHECK(s.allowed({3, 1}, 0));  // lhs 3 initialised by (3, 3)
    std::set<bucket> trained;
    for (int guard = 0; guard < 100 && !s.epoch_done(); ++guard) {
      auto g = s.acquire(0);
      std::vector<part_version> same;
      for (auto& k : g.drop) same.push_back({k, s.version(k)});
      REQUIRE(s.unlock(0, same));
      if (g.what != grant::kind::bucket) continue;
      CHECK(trained.insert(g.assigned).second);
      REQUIRE(s.release(0, g.assigned));
    }
    CHECK(s.epoch_done());
    CHECK(trained.size() == 16 - done.size());
    for (auto& b : done) CHECK_FALSE(trained.contains(b));
  }
  bucket_scheduler s({.nparts_lhs = 2, .nparts_rhs = 2});
  CHECK_THROWS_AS(s.start_epoch(0, {{2, 0}}), std::invalid_argument);
  CHECK_THROWS_AS(s.start_epoch(0, {{0, -1}}), std::invalid_argument);
}
