// The server roles on their own, in a real actor system: the lock server's
// protocol (enrolment, grants, write-back before unlock, parked acquires
// answered `wait`, a dead trainer re-queued, events), the partition server's
// versions and chunks, the parameter server's sums, and the partition client
// moving a table of several chunks both ways.
// LibTorch first: its glog CHECK macro must not replace doctest's.
#include <torch/torch.h>

#include <doctest/doctest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <random>
#include <thread>

#include "actors/node/run_common.h"
#include "actors/node/secure_remoting.h"
#include "actors/partition_bulk_server.h"
#include "actors/partition_client.h"
#include "actors/spawn.h"
#include "messages/bulk_wire.h"
#include "messages/interfaces.h"
#include "abg/storage/tensor_file.h"
#include "tests/test_util.h"

#include <sys/socket.h>

using namespace abg;
using namespace std::chrono_literals;
using msg::tensor;

namespace {

constexpr auto kTimeout = std::chrono::seconds(60);

// The bulk channel's token in these tests.
const cluster_token test_token{std::vector<std::uint8_t>(32, 7), "test"};

struct system_fixture {
  actors::secured_system_config cfg;
  std::unique_ptr<caf::actor_system> sys;
  std::vector<caf::actor> spawned;
  system_fixture() {
    msg::register_message_types(cfg);
    cfg.gate = std::make_shared<actors::gate>(test_token, actors::gate::limits{}, nullptr);
    cfg.set("scheduler.max-threads", 2);
    cfg.set("logger.console", caf::atom("none"));
    sys = std::make_unique<caf::actor_system>(cfg);
  }
  template <class Handle>
  Handle track(Handle h) {
    spawned.push_back(caf::actor_cast<caf::actor>(h));
    return h;
  }
  ~system_fixture() {
    for (auto& a : spawned) caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
    caf::scoped_actor self{*sys};
    self->wait_for(spawned);
    cfg.gate->stop();
  }
};

// What the lock server tells its subscriber.
struct events {
  std::mutex m;
  std::vector<msg::bucket_stats> released;
  std::vector<std::pair<uint32_t, std::vector<msg::bucket>>> requeued;
  std::vector<int32_t> done;
};

msg::events_actor spawn_events(caf::actor_system& sys, std::shared_ptr<events> ev) {
  return sys.spawn([ev](msg::events_actor::pointer) -> msg::events_actor::behavior_type {
    return {
      [ev](msg::released_atom, const msg::bucket_stats& s) {
        std::lock_guard g(ev->m);
        ev->released.push_back(s);
      },
      [ev](msg::requeued_atom, uint32_t t, const std::vector<msg::bucket>& b) {
        std::lock_guard g(ev->m);
        ev->requeued.emplace_back(t, b);
      },
      [ev](msg::epoch_done_atom, int32_t e) {
        std::lock_guard g(ev->m);
        ev->done.push_back(e);
      },
      [](msg::failed_atom, const std::string&) {},
      [](msg::stalled_atom, uint32_t, const std::string&) {},
    };
  });
}

template <class F>
bool eventually(F f) {
  for (int i = 0; i < 3000; ++i) {
    if (f()) return true;
    std::this_thread::sleep_for(1ms);
  }
  return f();
}

caf::actor spawn_dummy(caf::actor_system& sys) {
  return sys.spawn([](caf::event_based_actor*) -> caf::behavior { return {[](int) {}}; });
}

// Asks a lock server as a trainer would: each answer awaited, an error a
// failed test (a refusal is `false`).
struct lock_asker {
  caf::actor_system& sys;
  msg::lock_server_actor lock;
  caf::scoped_actor self{sys};
  msg::grant grant_of(uint32_t t) {
    msg::grant g;
    self->request(lock, kTimeout, msg::acquire_atom::value, t)
      .receive([&](msg::grant& r) { g = std::move(r); }, [&](caf::error& e) { FAIL(sys.render(e)); });
    return g;
  }
  template <class... Xs>
  bool yes(Xs... xs) {
    bool out = false;
    self->request(lock, kTimeout, xs...).receive([&](bool b) { out = b; }, [&](caf::error&) {});
    return out;
  }
};

}  // namespace

TEST_CASE("lock server: grants, write-back before unlock, events, wait, a dead trainer re-queued") {
  system_fixture fx;
  auto& sys = *fx.sys;
  auto ev = std::make_shared<events>();
  actors::deadlines limits;
  limits.park = 200ms;
  auto lock = fx.track(actors::spawn_lock_server(
    sys, {.nparts_lhs = 2, .nparts_rhs = 2, .order = schedule::bucket_order::inside_out, .shared_partitions = true,
          .num_trainers = 2},
    limits));
  auto sink = fx.track(spawn_events(sys, ev));
  lock_asker ask{sys, lock};
  auto& self = ask.self;
  auto grant_of = [&](uint32_t t) { return ask.grant_of(t); };
  auto yes = [&](auto... xs) { return ask.yes(xs...); };
  REQUIRE(yes(msg::subscribe_atom::value, sink));
  // Not enrolled: refused.
  self->request(lock, kTimeout, msg::acquire_atom::value, uint32_t{0})
    .receive([](msg::grant&) { FAIL("an unknown trainer got a grant"); }, [](caf::error&) {});
  auto t0 = fx.track(spawn_dummy(sys));
  auto t1 = fx.track(spawn_dummy(sys));
  REQUIRE(yes(msg::enroll_atom::value, uint32_t{0}, t0.address()));
  REQUIRE(yes(msg::enroll_atom::value, uint32_t{1}, t1.address()));
  REQUIRE(yes(msg::start_atom::value, int32_t{0}, std::vector<msg::bucket>{}));
  // inside_out: (0,0) first; then trainer 1 finds nothing it may take: wait, after the park time.
  auto g0 = grant_of(0);
  REQUIRE(g0.what == msg::grant::kind::bucket);
  CHECK(g0.assigned == msg::bucket{0, 0});
  REQUIRE(g0.fetch.size() == 1);
  auto start = std::chrono::steady_clock::now();
  auto g1 = grant_of(1);
  CHECK(g1.what == msg::grant::kind::wait);
  CHECK(std::chrono::steady_clock::now() - start >= 150ms);
  // Trainer 0 releases (0,0), gets (0,1): the partition it keeps is not fetched again.
  msg::bucket_stats s;
  s.trainer = 0;
  s.epoch = 0;
  s.trained = g0.assigned;
  s.edges = 10;
  REQUIRE(yes(msg::release_atom::value, s));
  CHECK_FALSE(yes(msg::release_atom::value, s));
  auto g2 = grant_of(0);
  REQUIRE(g2.what == msg::grant::kind::bucket);
  CHECK(g2.drop.empty());
  REQUIRE(g2.fetch.size() == 1);
  CHECK(g2.fetch[0].key.part == 1);
  // Trainer 1 dies: nothing held, nothing re-queued; trainer 0 dies with (0,1)
  // and (0,0) unsaved: both re-queued.
  caf::anon_send_exit(t1, caf::exit_reason::kill);
  caf::anon_send_exit(t0, caf::exit_reason::kill);
  REQUIRE(eventually([&] {
    std::lock_guard g(ev->m);
    return ev->requeued.size() == 2;
  }));
  {
    std::lock_guard g(ev->m);
    REQUIRE(ev->released.size() == 1);
    std::set<msg::bucket> back;
    for (auto& [t, b] : ev->requeued) back.insert(b.begin(), b.end());
    CHECK((back == std::set<msg::bucket>{{0, 0}, {0, 1}}));
  }
  // A new trainer finishes the epoch; epoch_done is announced once every partition is written back.
  auto t2 = fx.track(spawn_dummy(sys));
  REQUIRE(yes(msg::enroll_atom::value, uint32_t{0}, t2.address()));
  std::map<schedule::part_key, uint64_t> held;
  int trained = 0;
  for (int guard = 0; guard < 50; ++guard) {
    auto g = grant_of(0);
    std::vector<msg::part_version> written;
    for (auto& d : g.drop) written.push_back({d, held[d] + 1});
    if (!written.empty()) REQUIRE(yes(msg::unlock_atom::value, uint32_t{0}, written));
    for (auto& d : g.drop) held.erase(d);
    if (g.what == msg::grant::kind::wait) break;
    if (g.what != msg::grant::kind::bucket) continue;
    for (auto& f : g.fetch) held[f.key] = f.version;
    msg::bucket_stats r;
    r.trainer = 0;
    r.trained = g.assigned;
    REQUIRE(yes(msg::release_atom::value, r));
    ++trained;
  }
  CHECK(trained == 4);
  REQUIRE(eventually([&] {
    std::lock_guard g(ev->m);
    return ev->done == std::vector<int32_t>{0};
  }));
  // The next epoch cannot start while partitions are held, but can now.
  CHECK(yes(msg::start_atom::value, int32_t{1}, std::vector<msg::bucket>{}));
  // Reset: everything forgotten, partitions at the seeded version.
  REQUIRE(yes(msg::reset_atom::value, uint64_t{5} << 32));
  CHECK(grant_of(0).what == msg::grant::kind::wait);
  REQUIRE(yes(msg::start_atom::value, int32_t{2}, std::vector<msg::bucket>{}));
  auto g3 = grant_of(0);
  REQUIRE(g3.what == msg::grant::kind::bucket);
  for (auto& f : g3.fetch) CHECK(f.version == uint64_t{5} << 32);
  // Paused while trainer 0 trains g3: the pause is answered only once it
  // released the bucket and wrote its partitions back; meanwhile nothing new
  // is handed out.
  std::optional<bool> drained;
  self->send(lock, msg::pause_atom::value, true); // its answer arrives as a message
  msg::bucket_stats r3;
  r3.trainer = 0;
  r3.epoch = 2;
  r3.trained = g3.assigned;
  REQUIRE(yes(msg::release_atom::value, r3));
  auto d = grant_of(0);
  REQUIRE(d.what == msg::grant::kind::drop);
  self->receive([](bool) { FAIL("paused before the partitions were written back"); },
                caf::after(std::chrono::milliseconds(50)) >> [] {});
  std::vector<msg::part_version> back;
  for (auto& k : d.drop) back.push_back({k, (uint64_t{5} << 32) + 1});
  REQUIRE(yes(msg::unlock_atom::value, uint32_t{0}, back));
  self->receive([&](bool b) { drained = b; }, caf::after(kTimeout) >> [] { FAIL("the pause was not answered"); });
  CHECK(drained == std::optional<bool>(true));
  CHECK(grant_of(0).what == msg::grant::kind::wait);
  // Resumed: the epoch goes on.
  REQUIRE(yes(msg::pause_atom::value, false));
  CHECK(grant_of(0).what == msg::grant::kind::bucket);
}

namespace {

// A partition server in memory, or on disk in a fresh folder (buffer_capacity > 0).
struct server_under_test {
  std::unique_ptr<test::scratch_dir> dir;
  actors::table_store store;
  explicit server_under_test(bool on_disk) {
    if (!on_disk) return;
    dir = std::make_unique<test::scratch_dir>();
    store.dataset = storage::dataset_id::random();
    store.disk_path = dir->path() / "store";
  }
  std::size_t files() const {
    return static_cast<std::size_t>(std::distance(std::filesystem::directory_iterator(store.disk_path),
                                                  std::filesystem::directory_iterator()));
  }
};

void partition_server_contract(bool on_disk) {
  system_fixture fx;
  auto& sys = *fx.sys;
  server_under_test where(on_disk);
  auto ps = fx.track(actors::spawn_partition_server(sys, "test partition server", where.store));
  caf::scoped_actor self{sys};
  auto put = [&](msg::partition_chunk c) {
    std::optional<bool> out;
    self->request(ps, kTimeout, msg::put_atom::value, std::move(c))
      .receive([&](bool done) { out = done; }, [&](caf::error&) { out.reset(); });
    return out;
  };
  auto get = [&](const msg::partition_key& k, uint64_t min_version, uint64_t off, uint64_t n) {
    std::optional<msg::partition_chunk> out;
    self->request(ps, kTimeout, msg::get_atom::value, k, min_version, off, n)
      .receive([&](msg::partition_chunk& c) { out = std::move(c); }, [&](caf::error&) {});
    return out;
  };
  auto rows = [](int64_t n, int64_t dim, float base) {
    std::vector<float> e(static_cast<std::size_t>(n * dim)), s(static_cast<std::size_t>(n));
    for (std::size_t i = 0; i < e.size(); ++i) e[i] = base + static_cast<float>(i);
    for (std::size_t i = 0; i < s.size(); ++i) s[i] = base - static_cast<float>(i);
    return std::pair{tensor::make({n, dim}, std::move(e)), tensor::make({n}, std::move(s))};
  };
  auto first = [](const tensor& t, int64_t n, int64_t dim) {
    return tensor::make({n, dim}, std::vector<float>(t.values().begin(), t.values().begin() + n * dim));
  };
  msg::partition_key key{"node", 1};
  auto [e1, s1] = rows(10, 3, 0);
  REQUIRE(put({key, 5, msg::any_version, 0, 10, e1, s1}) == std::optional<bool>(true));
  // Fetched in chunks of 4 rows, all at version 5.
  std::vector<float> got;
  for (uint64_t off = 0; off < 10; off += 4) {
    auto c = get(key, 5, off, 4);
    REQUIRE(c);
    CHECK(c->row_offset == off);
    CHECK(c->total_rows == 10);
    CHECK(c->version == 5);
    got.insert(got.end(), c->embeddings.values().begin(), c->embeddings.values().end());
  }
  CHECK(got == std::vector<float>(e1.values().begin(), e1.values().end()));
  // Asking for a newer version than stored is refused: never a stale copy.
  CHECK_FALSE(get(key, 6, 0, 4).has_value());
  // Version 6 from version 5, in two chunks: only the last one commits.
  auto [e2, s2] = rows(10, 3, 100);
  auto head_state = tensor::make({6}, std::vector<float>(s2.values().begin(), s2.values().begin() + 6));
  REQUIRE(put({key, 6, 5, 0, 10, first(e2, 6, 3), head_state}) == std::optional<bool>(false));
  // The writer dies here: the stored copy is still version 5.
  CHECK(get(key, 0, 0, 100)->embeddings == e1);
  // A writer that started from another version is refused (it was replaced).
  CHECK_FALSE(put({key, 6, 4, 0, 10, e2, s2}).has_value());
  CHECK(get(key, 0, 0, 100)->version == 5);
  REQUIRE(put({key, 6, 5, 0, 10, e2, s2}) == std::optional<bool>(true));
  CHECK(get(key, 6, 0, 100)->embeddings == e2);
  // Bad chunks are refused.
  CHECK_FALSE(put({key, 7, 6, 7, 10, first(e2, 2, 3), tensor::make({2}, {0, 0})}).has_value());  // no first chunk
  CHECK_FALSE(put({key, 7, 6, 0, 10, tensor::make({2, 3}, {1, 2, 3}), tensor::make({2}, {0, 0})}).has_value());
  CHECK_FALSE(put({key, 7, 6, 0, 1, first(e2, 2, 3), tensor::make({2}, {0, 0})}).has_value());
  CHECK_FALSE(get({"other", 0}, 0, 0, 1).has_value());
  if (on_disk) {
    // The store holds version 6 alone: two files; the half-done and refused puts left none.
    CHECK(where.files() == 2);
  } else {
  // A first chunk claiming a partition of 2^33 rows of 3 (128 GiB) is
  // refused before anything is allocated, naming the claim; the server goes
  // on. (On disk nothing is allocated; in a run the partition shapes bound a claim.)
  std::string refused;
  msg::partition_chunk huge;
  huge.key = {"huge", 0};
  huge.version = 1;
  huge.base_version = msg::any_version;
  huge.total_rows = uint64_t{1} << 33;
  huge.embeddings = first(e2, 1, 3);
  huge.optim_state = tensor::make({1}, {0});
  self->request(ps, kTimeout, msg::put_atom::value, std::move(huge))
    .receive([](bool) {}, [&](caf::error& e) { refused = actors::error_text(sys, e); });
  CHECK(refused.find("a put of partition huge/0 claims") != std::string::npos);
  CHECK(refused.find("refused before allocating") != std::string::npos);
  }
  CHECK(get(key, 6, 0, 100)->embeddings == e2);
  // list and clear.
  self->request(ps, kTimeout, msg::list_atom::value)
    .receive(
      [&](std::vector<msg::partition_info>& all) {
        REQUIRE(all.size() == 1);
        CHECK(all[0].key == key);
        CHECK(all[0].version == 6);
        CHECK(all[0].rows == 10);
        CHECK(all[0].dim == 3);
      },
      [&](caf::error& e) { FAIL(sys.render(e)); });
  self->request(ps, kTimeout, msg::clear_atom::value).receive([](bool) {}, [&](caf::error& e) { FAIL(sys.render(e)); });
  CHECK_FALSE(get(key, 0, 0, 1).has_value());
  if (on_disk) CHECK(where.files() == 0);
}

} // namespace

namespace {

// A lock server for 2 trainers (enrolled, epoch 0 started) at P = 2 x
// trainers with room for two buckets: every partition is locked most of the
// time, so reservations await partitions.
msg::lock_server_actor spawn_contended_lock_server(system_fixture& fx, schedule::bucket_order order, uint64_t seed,
                                                   bool shared = true) {
  auto& sys = *fx.sys;
  auto lock = fx.track(actors::spawn_lock_server(
    sys, {.nparts_lhs = 4, .nparts_rhs = 4, .order = order, .seed = seed, .shared_partitions = shared,
          .num_trainers = 2, .tree_init_order = false, .buffer_capacity = 4},
    {}));
  lock_asker ask{sys, lock};
  for (uint32_t t : {0u, 1u}) REQUIRE(ask.yes(msg::enroll_atom::value, t, fx.track(spawn_dummy(sys)).address()));
  REQUIRE(ask.yes(msg::start_atom::value, int32_t{0}, std::vector<msg::bucket>{}));
  return lock;
}

}  // namespace

TEST_CASE("lock server: a reservation awaits a partition the other trainer holds, handed over when written back") {
  system_fixture fx;
  auto& sys = *fx.sys;
  auto lock = spawn_contended_lock_server(fx, schedule::bucket_order::inside_out, 0);
  lock_asker ask{sys, lock};
  auto& self = ask.self;
  auto grant_of = [&](uint32_t t) { return ask.grant_of(t); };
  auto yes = [&](auto... xs) { return ask.yes(xs...); };
  auto handed = [&](uint32_t t) {
    std::vector<msg::part_version> out;
    self->request(lock, kTimeout, msg::handed_atom::value, t)
      .receive([&](std::vector<msg::part_version>& v) { out = std::move(v); },
               [&](caf::error& e) { FAIL(sys.render(e)); });
    return out;
  };
  std::map<uint32_t, std::map<schedule::part_key, uint64_t>> holds;
  std::map<uint32_t, std::optional<msg::bucket>> training;
  // A trainer's turn: release its bucket if it trains one, then acquire and
  // write back what the grant drops.
  auto turn = [&](uint32_t t) {
    if (training[t]) {
      msg::bucket_stats r;
      r.trainer = t;
      r.trained = *training[t];
      REQUIRE(yes(msg::release_atom::value, r));
      training[t].reset();
    }
    auto g = grant_of(t);
    std::vector<msg::part_version> written;
    for (auto& d : g.drop) written.push_back({d, holds[t][d] + 1});
    if (!written.empty()) REQUIRE(yes(msg::unlock_atom::value, t, written));
    for (auto& d : g.drop) holds[t].erase(d);
    if (g.what == msg::grant::kind::bucket) {
      for (auto& f : g.fetch) holds[t][f.key] = f.version;
      training[t] = g.assigned;
    }
    return std::pair{g, written};
  };
  std::optional<std::pair<uint32_t, schedule::part_key>> awaiting;
  for (int step = 0; step < 64 && !awaiting; ++step) {
    const auto t = static_cast<uint32_t>(step % 2);
    auto [g, written] = turn(t);
    if (!g.awaited.empty()) awaiting = std::pair{t, g.awaited.front()};
  }
  REQUIRE(awaiting);
  const auto [waiter, k] = *awaiting;
  const uint32_t holder = 1 - waiter;
  CHECK(holds[holder].contains(k));
  CHECK(handed(waiter).empty());  // still the holder's
  // The holder's next grant writes it back (an awaited partition is never
  // kept), and the unlock locks it for the waiter at the version written.
  auto [g, written] = turn(holder);
  CHECK(std::ranges::count(g.drop, k) == 1);
  const auto got = handed(waiter);
  REQUIRE(got.size() == 1);
  CHECK(got[0].key == k);
  const auto w = std::ranges::find_if(written, [&](const msg::part_version& v) { return v.key == k; });
  REQUIRE(w != written.end());
  CHECK(got[0].version == w->version);
  CHECK(handed(waiter).empty());  // told once
  // The waiter's next grant is its reserved bucket, which fetches that version.
  auto [next, none] = turn(waiter);
  REQUIRE(next.what == msg::grant::kind::bucket);
  CHECK((next.assigned.lhs == k.part || next.assigned.rhs == k.part));
  CHECK(std::ranges::count(next.fetch, got[0]) == 1);
}

TEST_CASE("lock server: paused while a trainer is parked awaiting partitions, it is told at once to give its own back") {
  // Over a few orders until a trainer whose reservation awaits a partition
  // is parked (no answer within 300 ms) holding partitions for it (kept, or
  // locked for it). Without being told at pause time it would hold them
  // until it asks again, and the pause would never be answered.
  bool seen = false;
  for (uint64_t seed = 1; seed <= 20 && !seen; ++seed) {
    CAPTURE(seed);
    system_fixture fx;
    auto& sys = *fx.sys;
    auto lock = spawn_contended_lock_server(fx, schedule::bucket_order::random, seed, seed % 2 == 0);
    lock_asker ask{sys, lock};
    std::vector<std::unique_ptr<caf::scoped_actor>> trainer;  // each trainer's own mailbox
    for (int t = 0; t < 2; ++t) trainer.push_back(std::make_unique<caf::scoped_actor>(sys));
    std::map<uint32_t, std::map<schedule::part_key, uint64_t>> holds;
    std::map<uint32_t, std::optional<msg::bucket>> training;
    std::map<uint32_t, bool> awaits, locked_ahead;  // what its last bucket's grant reserved
    auto write_back = [&](uint32_t t, const msg::grant& g) {
      std::vector<msg::part_version> back;
      for (auto& d : g.drop) back.push_back({d, holds[t][d] + 1});
      if (!back.empty()) REQUIRE(ask.yes(msg::unlock_atom::value, t, back));
      for (auto& d : g.drop) holds[t].erase(d);
    };
    // A parked trainer's answer comes to its mailbox later; meanwhile the
    // other goes on.
    std::map<uint32_t, bool> waiting;
    std::optional<uint32_t> parked;
    auto take = [&](uint32_t t, const msg::grant& g) {
      write_back(t, g);
      if (g.what != msg::grant::kind::bucket) return;
      for (auto& f : g.fetch) holds[t][f.key] = f.version;
      training[t] = g.assigned;
      awaits[t] = !g.awaited.empty();
      locked_ahead[t] = !g.ahead.empty();
    };
    std::mt19937 pick(static_cast<std::uint32_t>(seed));
    for (int step = 0; step < 400 && !parked; ++step) {
      const auto t = static_cast<uint32_t>(pick() % 2);
      std::optional<msg::grant> answer;
      if (waiting[t]) {
        (*trainer[t])->receive([&](msg::grant& r) { answer = std::move(r); }, caf::after(1ms) >> [] {});
        if (!answer) continue;
        waiting[t] = false;
        take(t, *answer);
        continue;
      }
      if (training[t]) {
        msg::bucket_stats r;
        r.trainer = t;
        r.trained = *training[t];
        REQUIRE(ask.yes(msg::release_atom::value, r));
        training[t].reset();
      }
      (*trainer[t])->send(lock, msg::acquire_atom::value, t);
      (*trainer[t])->receive([&](msg::grant& r) { answer = std::move(r); }, caf::after(300ms) >> [] {});
      if (answer) {
        take(t, *answer);
        continue;
      }
      waiting[t] = true;
      // Parked for lack of what its reservation awaits, holding partitions for it.
      if (awaits[t] && (!holds[t].empty() || locked_ahead[t])) parked = t;
    }
    if (!parked) continue;  // not seen in this order
    seen = true;
    const uint32_t other = 1 - *parked;
    ask.self->send(lock, msg::pause_atom::value, true);
    // The parked trainer gives back its reservation at once (and writes
    // back what it kept for it, if anything).
    (*trainer[*parked])->receive([&](msg::grant& g) { write_back(*parked, g); }, caf::after(300ms) >> [] {});
    if (training[other]) {
      msg::bucket_stats r;
      r.trainer = other;
      r.trained = *training[other];
      REQUIRE(ask.yes(msg::release_atom::value, r));
    }
    auto d = ask.grant_of(other);  // paused: everything written back
    CHECK(d.what != msg::grant::kind::bucket);
    write_back(other, d);
    std::optional<bool> drained;
    ask.self->receive([&](bool b) { drained = b; }, caf::after(10s) >> [] {});
    CHECK(drained == std::optional<bool>(true));
  }
  CHECK(seen);
}

TEST_CASE("partition server: chunks, versions, a half-done or conflicting put changes nothing, in memory and on disk") {
  for (bool on_disk : {false, true}) {
    CAPTURE(on_disk);
    partition_server_contract(on_disk);
  }
}

TEST_CASE("partition server on disk: a damaged file is refused by name, an unusable folder named at the first put") {
  system_fixture fx;
  auto& sys = *fx.sys;
  server_under_test where(true);
  auto ps = fx.track(actors::spawn_partition_server(sys, "test partition server", where.store));
  msg::partition_key key{"node", 2};
  model::table t{torch::randn({50, 4}), torch::rand({50})};
  REQUIRE(actors::store_table(sys, {ps, ""}, key, t, 3, msg::any_version, kTimeout));
  REQUIRE(actors::fetch_table(sys, {ps, ""}, key, 3, kTimeout));
  std::filesystem::path emb;
  for (auto& f : std::filesystem::directory_iterator(where.store.disk_path))
    if (f.path().filename().string().find(".emb.") != std::string::npos) emb = f.path();
  REQUIRE_FALSE(emb.empty());
  {
    std::fstream f(emb, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(storage::tensor_header_size + 5));
    f.put('\x55');
  }
  auto bad = actors::fetch_table(sys, {ps, ""}, key, 3, kTimeout);
  REQUIRE_FALSE(bad);
  CHECK(bad.error().message.find(emb.string()) != std::string::npos);
  CHECK(bad.error().message.find("checksum mismatch") != std::string::npos);

  // A store folder that cannot be made (a file is in the way).
  test::scratch_dir other;
  test::write_text(other / "blocked", "a file, not a folder");
  actors::table_store blocked{{}, storage::dataset_id::random(), {}, other / "blocked" / "store"};
  auto ps2 = fx.track(actors::spawn_partition_server(sys, "blocked partition server", blocked));
  auto refused = actors::store_table(sys, {ps2, ""}, key, t, 1, msg::any_version, kTimeout);
  REQUIRE_FALSE(refused);
  CHECK(refused.error().message.find("cannot create the partition store") != std::string::npos);
  CHECK(refused.error().message.find((other / "blocked").string()) != std::string::npos);
}

namespace {

void partition_client_both_ways(bool on_disk) {
  system_fixture fx;
  auto& sys = *fx.sys;
  server_under_test where(on_disk);
  auto ps = fx.track(actors::spawn_partition_server(sys, "test partition server", where.store));
  // A server that stores on disk takes puts a block of rows at a time.
  auto bulk = actors::partition_bulk_server::start(sys, ps, "127.0.0.1", {}, nullptr, on_disk);
  REQUIRE(bulk);
  // 30,000 rows of 100 floats: 12 MB, two chunks of 8 MiB between processes, one in a process.
  const int64_t n = 30000, d = 100;
  model::table t{torch::randn({n, d}), torch::rand({n})};
  for (bool through_bulk : {false, true}) {
    CAPTURE(through_bulk);
    actors::partition_server_ref ref{ps, through_bulk ? fmt::format("127.0.0.1:{}", (*bulk)->port()) : ""};
    msg::partition_key key{"node", through_bulk ? 13 : 3};
    REQUIRE(actors::store_table(sys, ref, key, t, 7, msg::any_version, kTimeout));
    if (!through_bulk && !on_disk) {
      // In one process the server keeps the stored table itself, not a copy:
      // a copy's fresh pages made in-memory swaps several times slower.
      caf::scoped_actor self{sys};
      const float* kept = nullptr;
      self->request(ps, kTimeout, msg::get_atom::value, key, uint64_t{7}, uint64_t{0}, uint64_t(n))
        .receive([&](msg::partition_chunk& c) { kept = c.embeddings.values().data(); },
                 [&](caf::error& e) { FAIL(sys.render(e)); });
      CHECK(kept == t.embeddings.data_ptr<float>());
    }
    auto back = actors::fetch_table(sys, ref, key, 7, kTimeout);
    REQUIRE(back);
    CHECK(back->version == 7);
    // The fetched table is the caller's own: training it leaves the stored version as it was.
    CHECK(back->table.embeddings.data_ptr<float>() != t.embeddings.data_ptr<float>());
    CHECK(torch::equal(back->table.embeddings, t.embeddings));
    CHECK(torch::equal(back->table.state, t.state));
    // Stale and conflicting requests are errors that name the partition.
    auto stale = actors::fetch_table(sys, ref, key, 8, kTimeout);
    REQUIRE_FALSE(stale);
    CHECK(stale.error().message.find(msg::to_string(key)) != std::string::npos);
    CHECK_FALSE(stale.error().lost_peer);
    auto conflict = actors::store_table(sys, ref, key, t, 9, 3, kTimeout);
    REQUIRE_FALSE(conflict);
    CHECK(conflict.error().message.find("version 7 is stored") != std::string::npos);
    // An empty partition travels too.
    model::table empty{torch::empty({0, d}), torch::empty({0})};
    msg::partition_key none{"node", through_bulk ? 14 : 4};
    REQUIRE(actors::store_table(sys, ref, none, empty, 1, msg::any_version, kTimeout));
    auto e = actors::fetch_table(sys, ref, none, 1, kTimeout);
    REQUIRE(e);
    CHECK(e->table.embeddings.size(0) == 0);
    // Element-wise Adagrad's state, [rows, dim] (entity_optimizer = "adagrad"), in several chunks.
    model::table ew{torch::randn({n, d}), torch::rand({n, d})};
    msg::partition_key ew_key{"node", through_bulk ? 15 : 5};
    REQUIRE(actors::store_table(sys, ref, ew_key, ew, 2, msg::any_version, kTimeout));
    auto ew_back = actors::fetch_table(sys, ref, ew_key, 2, kTimeout);
    REQUIRE(ew_back);
    CHECK(ew_back->table.state_width() == d);
    CHECK(torch::equal(ew_back->table.embeddings, ew.embeddings));
    CHECK(torch::equal(ew_back->table.state, ew.state));
    if (through_bulk) {
      // Streamed (a checkpoint gathered from another node): the same values, a
      // chunk at a time, embeddings then element-wise state, none held whole.
      std::vector<float> got;
      std::size_t largest = 0;
      std::int64_t width = 0;
      actors::table_sink sink{[&](std::uint64_t rows, std::int64_t dim, std::int64_t w) -> expected<void> {
                                CHECK(rows == static_cast<std::uint64_t>(n));
                                CHECK(dim == d);
                                width = w;
                                return {};
                              },
                              [&](std::span<const float> v) -> expected<void> {
                                largest = std::max(largest, v.size());
                                got.insert(got.end(), v.begin(), v.end());
                                return {};
                              }};
      auto version = actors::stream_table(sys, ref, {"node", 15}, 2, kTimeout, sink);
      REQUIRE(version);
      CHECK(*version == 2);
      CHECK(width == d);
      CHECK(largest <= msg::bulk::chunk_elements);
      auto both = torch::cat({ew.embeddings.flatten(), ew.state.flatten()});
      REQUIRE(got.size() == static_cast<std::size_t>(both.numel()));
      CHECK(torch::equal(torch::from_blob(got.data(), {both.numel()}), both));
      // A sink's refusal ends the transfer with its message; stale versions and
      // servers in this process are refused.
      int calls = 0;
      actors::table_sink refusing{sink.begin, [&](std::span<const float>) -> expected<void> {
                                    ++calls;
                                    return fail("disk full");
                                  }};
      auto refused = actors::stream_table(sys, ref, {"node", 15}, 2, kTimeout, refusing);
      REQUIRE_FALSE(refused);
      CHECK(calls == 1);
      CHECK(refused.error().message.find("disk full") != std::string::npos);
      auto stale_stream = actors::stream_table(sys, ref, {"node", 15}, 3, kTimeout, sink);
      REQUIRE_FALSE(stale_stream);
      CHECK(stale_stream.error().message.find("node/15") != std::string::npos);
      CHECK_FALSE(actors::stream_table(sys, {ps, ""}, {"node", 15}, 2, kTimeout, sink));
    }
  }
  // What went in through one path comes out through the other.
  auto crossed = actors::fetch_table(sys, {ps, ""}, {"node", 13}, 7, kTimeout);
  REQUIRE(crossed);
  CHECK(torch::equal(crossed->table.embeddings, t.embeddings));
  // On disk no put was whole in memory: the largest held was one block (of
  // the row-wise table: 20,763 rows of 101 floats), not the 30,000 rows.
  const msg::bulk::rows_layout layout{static_cast<uint64_t>(n), d, 1};
  CHECK((*bulk)->put_rows_held_most() == (on_disk ? layout.block_rows() : static_cast<uint64_t>(n)));
  {  // A put whose client goes away after its first block leaves the stored version as it was.
    const auto endpoint = fmt::format("127.0.0.1:{}", (*bulk)->port());
    auto ch = msg::bulk::channel::connect(endpoint, test_token.key, std::chrono::seconds(10));
    REQUIRE(ch);
    msg::bulk::request r;
    r.what = msg::bulk::request::op::put;
    r.entity = "node";
    r.part = 13;
    r.version = 8;
    r.base_version = 7;
    r.rows = layout.rows;
    r.dim = d;
    REQUIRE(ch->send(r));
    auto accepted = ch->receive_reply();
    REQUIRE(accepted);
    REQUIRE(accepted->ok);
    auto half = torch::zeros({n, d});
    auto half_state = torch::zeros({n});
    REQUIRE(ch->send_rows(layout, 0, layout.block_rows(), half.data_ptr<float>(), half_state.data_ptr<float>()));
  }  // closed mid-put
  if (on_disk) {
    // Once the server has seen the connection close, the files of the block
    // it wrote are gone, not kept until the partition's next put.
    for (int i = 0; i < 400 && (*bulk)->connections() > 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(25));
    REQUIRE((*bulk)->connections() == 0);
    std::vector<std::string> temporaries;
    for (const auto& f : std::filesystem::directory_iterator(where.store.disk_path))
      if (f.path().filename().string().find(".tmp.") != std::string::npos) temporaries.push_back(f.path().string());
    CHECK(temporaries.empty());
  }
  auto kept = actors::fetch_table(sys, {ps, ""}, {"node", 13}, 7, kTimeout);
  REQUIRE(kept);
  CHECK(kept->version == 7);
  CHECK(torch::equal(kept->table.embeddings, t.embeddings));
  CHECK(torch::equal(kept->table.state, t.state));
  // And the next put of that partition is taken whole.
  model::table next{torch::randn({n, d}), torch::rand({n})};
  actors::partition_server_ref through{ps, fmt::format("127.0.0.1:{}", (*bulk)->port())};
  REQUIRE(actors::store_table(sys, through, {"node", 13}, next, 8, 7, kTimeout));
  auto after = actors::fetch_table(sys, through, {"node", 13}, 8, kTimeout);
  REQUIRE(after);
  CHECK(torch::equal(after->table.embeddings, next.embeddings));
  CHECK(torch::equal(after->table.state, next.state));
}

} // namespace

TEST_CASE("partition client: a table of several chunks both ways, through messages and through the bulk channel") {
  for (bool on_disk : {false, true}) {
    CAPTURE(on_disk);
    partition_client_both_ways(on_disk);
  }
}

TEST_CASE("the bulk channel refuses garbage and huge claims before allocating, and keeps serving") {
  system_fixture fx;
  auto& sys = *fx.sys;
  auto ps = fx.track(actors::spawn_partition_server(sys, "test partition server"));
  auto bulk = actors::partition_bulk_server::start(sys, ps, "127.0.0.1", {});
  REQUIRE(bulk);
  const auto endpoint = fmt::format("127.0.0.1:{}", (*bulk)->port());
  {  // Noise instead of a request.
    auto ch = msg::bulk::channel::connect(endpoint, test_token.key, std::chrono::seconds(10));
    REQUIRE(ch);
    const char noise[] = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
    REQUIRE(::send(ch->fd(), noise, sizeof noise, MSG_NOSIGNAL) > 0);
    auto rep = ch->receive_reply();
    if (rep) {
      CHECK_FALSE(rep->ok);
    }
  }
  {  // A put claiming 2^40 rows: refused by the limits, nothing allocated.
    auto ch = msg::bulk::channel::connect(endpoint, test_token.key, std::chrono::seconds(10));
    REQUIRE(ch);
    msg::bulk::request r;
    r.what = msg::bulk::request::op::put;
    r.entity = "node";
    r.rows = uint64_t{1} << 40;
    r.dim = 100;
    REQUIRE(ch->send(r));
    auto rep = ch->receive_reply();
    REQUIRE(rep);
    CHECK_FALSE(rep->ok);
    CHECK(rep->error.find("too large") != std::string::npos);
  }
  {  // Within the decoder's limits (2^30 rows of 64: 2^36 elements, 260 GiB with
     // the optimizer state) but beyond this machine: refused before allocating.
    auto ch = msg::bulk::channel::connect(endpoint, test_token.key, std::chrono::seconds(10));
    REQUIRE(ch);
    msg::bulk::request r;
    r.what = msg::bulk::request::op::put;
    r.entity = "node";
    r.rows = uint64_t{1} << 30;
    r.dim = 64;
    REQUIRE(ch->send(r));
    auto rep = ch->receive_reply();
    REQUIRE(rep);
    CHECK_FALSE(rep->ok);
    CAPTURE(rep->error);
    CHECK(rep->error.find("claims 260.0 GiB") != std::string::npos);
    CHECK(rep->error.find("refused before allocating") != std::string::npos);
  }
  {  // A get of a partition nobody stored.
    auto got = actors::fetch_table(sys, {ps, endpoint}, {"nobody", 0}, 0, kTimeout);
    REQUIRE_FALSE(got);
    CHECK(got.error().message.find("unknown partition nobody/0") != std::string::npos);
  }
  // Still serving.
  model::table t{torch::randn({10, 4}), torch::rand({10})};
  REQUIRE(actors::store_table(sys, {ps, endpoint}, {"node", 0}, t, 1, msg::any_version, kTimeout));
  auto back = actors::fetch_table(sys, {ps, endpoint}, {"node", 0}, 1, kTimeout);
  REQUIRE(back);
  CHECK(torch::equal(back->table.embeddings, t.embeddings));
}

TEST_CASE("parameter server: push returns the sum; clear forgets") {
  system_fixture fx;
  auto& sys = *fx.sys;
  auto ps = fx.track(actors::spawn_parameter_server(sys, "test parameter server"));
  caf::scoped_actor self{sys};
  auto push = [&](std::vector<float> v) {
    std::vector<float> out;
    self->request(ps, kTimeout, msg::push_atom::value, std::string("rel0"), tensor::make({2}, std::move(v)))
      .receive([&](const tensor& t) { out.assign(t.values().begin(), t.values().end()); }, [&](caf::error&) {});
    return out;
  };
  CHECK(push({1, 2}) == std::vector<float>{1, 2});
  CHECK(push({0.5f, -1}) == std::vector<float>{1.5f, 1});
  CHECK(push({1, 1, 1}).empty());  // shape mismatch refused
  self->request(ps, kTimeout, msg::pull_atom::value, std::string("rel0"))
    .receive([&](const tensor& t) { CHECK(std::vector<float>(t.values().begin(), t.values().end()) == std::vector<float>{1.5f, 1}); },
             [&](caf::error& err) { FAIL(sys.render(err)); });
  self->request(ps, kTimeout, msg::clear_atom::value).receive([](bool) {}, [&](caf::error& e) { FAIL(sys.render(e)); });
  self->request(ps, kTimeout, msg::pull_atom::value, std::string("rel0"))
    .receive([&](const tensor&) { FAIL("cleared parameter answered"); }, [](caf::error&) {});
}

TEST_CASE("a partition server and its bulk channel refuse a put that does not fit the partition it names") {
  system_fixture fx;
  auto& sys = *fx.sys;
  auto shapes = std::make_shared<actors::partition_shapes>();
  (*shapes)[{"node", 0}] = {10, 3};
  auto ps = fx.track(actors::spawn_partition_server(sys, "test partition server", {}, shapes));
  auto bulk = actors::partition_bulk_server::start(sys, ps, "127.0.0.1", {}, shapes);
  REQUIRE(bulk);
  const auto endpoint = fmt::format("127.0.0.1:{}", (*bulk)->port());
  for (bool through_bulk : {false, true}) {
    CAPTURE(through_bulk);
    actors::partition_server_ref ref{ps, through_bulk ? endpoint : ""};
    auto put = [&](msg::partition_key key, int64_t rows, int64_t dim) {
      model::table t{torch::zeros({rows, dim}), torch::zeros({rows})};
      return actors::store_table(sys, ref, key, t, 1, msg::any_version, kTimeout);
    };
    REQUIRE(put({"node", 0}, 10, 3));
    auto more_rows = put({"node", 0}, 11, 3);
    REQUIRE_FALSE(more_rows);
    CHECK(more_rows.error().message.find("11 rows of dimension 3, but the partition holds 10 entities of dimension 3") !=
          std::string::npos);
    auto other_dim = put({"node", 0}, 10, 4);
    REQUIRE_FALSE(other_dim);
    CHECK(other_dim.error().message.find("holds 10 entities of dimension 3") != std::string::npos);
    model::table elementwise{torch::zeros({10, 3}), torch::zeros({10, 3})};
    auto other_state = actors::store_table(sys, ref, {"node", 0}, elementwise, 2, msg::any_version, kTimeout);
    REQUIRE_FALSE(other_state);
    CHECK(other_state.error().message.find("3 optimizer values per row, but this run's entity_optimizer keeps 1") !=
          std::string::npos);
    auto no_such = put({"node", 7}, 10, 3);
    REQUIRE_FALSE(no_such);
    CHECK(no_such.error().message.find("this run has no such partition (entity type 'node', part 7)") !=
          std::string::npos);
  }
  // What was stored stays.
  auto back = actors::fetch_table(sys, {ps, ""}, {"node", 0}, 1, kTimeout);
  REQUIRE(back);
  CHECK(back->table.embeddings.size(0) == 10);
}
