#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "actors/interfaces.h"
#include "actors/wire_relay.h"

using namespace abg::actors;
using namespace std::chrono_literals;
namespace msg = abg::msg;

namespace {

constexpr auto kTimeout = std::chrono::seconds(60);

struct system_fixture {
  caf::actor_system_config cfg;
  std::unique_ptr<caf::actor_system> sys;
  system_fixture() {
    msg::register_message_types(cfg);
    cfg.set("scheduler.max-threads", 2);
    sys = std::make_unique<caf::actor_system>(cfg);
  }
  std::vector<caf::actor> spawned;
  template <class Handle>
  Handle track(Handle h) {
    spawned.push_back(caf::actor_cast<caf::actor>(h));
    return h;
  }
  ~system_fixture() {
    for (auto& a : spawned) caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
    spawned.clear();
  }
};

// Records what the fake kernels do, and checks that no partition is in two
// kernels at once (lhs and rhs are different entity types here).
struct recorder {
  std::mutex m;
  std::set<std::pair<int, int>> in_use;
  bool overlap = false;
  std::map<int32_t, std::vector<bucket>> trained;  // by epoch
  std::map<int32_t, std::vector<uint32_t>> by_trainer;
  std::set<std::thread::id> threads;
};

kernel_fn fake_kernel(std::shared_ptr<recorder> rec, std::chrono::milliseconds work = 2ms) {
  return [rec, work](const kernel_job& job, std::stop_token stop) {
    std::pair<int, int> l{0, job.assigned.lhs}, r{1, job.assigned.rhs};
    {
      std::lock_guard g(rec->m);
      if (rec->in_use.contains(l) || rec->in_use.contains(r)) rec->overlap = true;
      rec->in_use.insert(l);
      rec->in_use.insert(r);
      rec->threads.insert(std::this_thread::get_id());
    }
    auto until = std::chrono::steady_clock::now() + work;
    while (std::chrono::steady_clock::now() < until && !stop.stop_requested()) std::this_thread::sleep_for(100us);
    std::lock_guard g(rec->m);
    rec->in_use.erase(l);
    rec->in_use.erase(r);
    rec->trained[job.epoch].push_back(job.assigned);
    rec->by_trainer[job.epoch].push_back(job.trainer);
    bucket_stats s;
    s.edges = 100;
    s.loss = 0.5;
    s.seconds = 0.001;
    return s;
  };
}

std::vector<epoch_stats> run_epochs(caf::actor_system& sys, coordinator_actor coord, int32_t first, int32_t count) {
  caf::scoped_actor self{sys};
  std::vector<epoch_stats> out;
  self->request(coord, kTimeout, msg::run_epochs_atom::value, first, count)
      .receive([&](std::vector<epoch_stats>& r) { out = std::move(r); },
               [&](caf::error& err) { FAIL("run_epochs failed: " << sys.render(err)); });
  return out;
}

}  // namespace

TEST_CASE("an epoch with 2 trainers and a fake kernel trains every bucket once") {
  system_fixture fx;
  auto& sys = *fx.sys;
  auto rec = std::make_shared<recorder>();
  scheduler_config cfg{.nparts_lhs = 4, .nparts_rhs = 4, .order = bucket_order::inside_out, .num_trainers = 2};
  auto lock = fx.track(spawn_lock_server(sys, cfg));
  std::vector<trainer_actor> trainers{fx.track(spawn_trainer(sys, 0, lock, fake_kernel(rec))),
                                      fx.track(spawn_trainer(sys, 1, lock, fake_kernel(rec)))};
  std::vector<int32_t> seen_epochs;
  auto coord = fx.track(spawn_coordinator(sys, lock, trainers, [&](const epoch_stats& s) { seen_epochs.push_back(s.epoch); }));
  auto stats = run_epochs(sys, coord, 0, 3);
  REQUIRE(stats.size() == 3);
  CHECK(seen_epochs == std::vector<int32_t>{0, 1, 2});
  for (int e = 0; e < 3; ++e) {
    CHECK(stats[static_cast<std::size_t>(e)].epoch == e);
    CHECK(stats[static_cast<std::size_t>(e)].buckets == 16);
    CHECK(stats[static_cast<std::size_t>(e)].edges == 1600);
    CHECK(stats[static_cast<std::size_t>(e)].requeued == 0);
    std::lock_guard g(rec->m);
    auto& v = rec->trained[e];
    CHECK(v.size() == 16);
    CHECK(std::set<bucket>(v.begin(), v.end()).size() == 16);
  }
  std::lock_guard g(rec->m);
  CHECK_FALSE(rec->overlap);
  // Kernels ran on the trainers' worker threads, not on the test thread.
  CHECK_FALSE(rec->threads.contains(std::this_thread::get_id()));
}

TEST_CASE("a trainer answers while its kernel runs; killing it mid-bucket re-queues the bucket") {
  system_fixture fx;
  auto& sys = *fx.sys;
  auto rec = std::make_shared<recorder>();
  std::atomic<bool> blocked_started{false};
  std::atomic<bool> blocked_stopped{false};
  std::atomic<int> blocked_bucket_lhs{-1}, blocked_bucket_rhs{-1};
  // Trainer 0 blocks in its first bucket until it is stopped.
  kernel_fn blocking = [&](const kernel_job& job, std::stop_token stop) -> bucket_stats {
    blocked_bucket_lhs = job.assigned.lhs;
    blocked_bucket_rhs = job.assigned.rhs;
    blocked_started = true;
    while (!stop.stop_requested()) std::this_thread::sleep_for(1ms);
    blocked_stopped = true;
    return {};
  };
  scheduler_config cfg{.nparts_lhs = 3, .nparts_rhs = 3, .order = bucket_order::affinity, .num_trainers = 2};
  auto lock = fx.track(spawn_lock_server(sys, cfg));
  auto t0 = fx.track(spawn_trainer(sys, 0, lock, blocking));
  auto t1 = fx.track(spawn_trainer(sys, 1, lock, fake_kernel(rec)));
  auto coord = fx.track(spawn_coordinator(sys, lock, {t0, t1}));
  caf::scoped_actor self{sys};
  auto pending = self->request(coord, kTimeout, msg::run_epochs_atom::value, int32_t{0}, int32_t{1});
  auto deadline = std::chrono::steady_clock::now() + 30s;
  while (!blocked_started && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(1ms);
  REQUIRE(blocked_started.load());
  // Responsive while the kernel runs.
  self->request(t0, kTimeout, msg::status_atom::value)
      .receive([&](const msg::trainer_status& s) {
                 CHECK(s.busy);
                 CHECK(s.trainer == 0);
               },
               [&](caf::error& err) { FAIL(sys.render(err)); });
  self->send_exit(t0, caf::exit_reason::kill);
  std::vector<epoch_stats> stats;
  pending.receive([&](std::vector<epoch_stats>& r) { stats = std::move(r); },
                  [&](caf::error& err) { FAIL(sys.render(err)); });
  REQUIRE(stats.size() == 1);
  CHECK(stats[0].buckets == 9);
  CHECK(stats[0].requeued == 1);
  for (const auto& b : stats[0].per_bucket) CHECK(b.trainer == 1);
  CHECK(blocked_stopped.load());  // the worker was stopped and joined
  std::lock_guard g(rec->m);
  auto& v = rec->trained[0];
  CHECK(std::set<bucket>(v.begin(), v.end()).size() == 9);
  CHECK(std::set<bucket>(v.begin(), v.end()).contains(bucket{blocked_bucket_lhs, blocked_bucket_rhs}));
}

TEST_CASE("a failing kernel stops its trainer and another trainer takes the bucket") {
  system_fixture fx;
  auto& sys = *fx.sys;
  auto rec = std::make_shared<recorder>();
  kernel_fn throwing = [](const kernel_job&, std::stop_token) -> bucket_stats { throw std::runtime_error("boom"); };
  auto lock = fx.track(spawn_lock_server(sys, {.nparts_lhs = 2, .nparts_rhs = 2, .num_trainers = 2}));
  auto t0 = fx.track(spawn_trainer(sys, 0, lock, throwing));
  auto t1 = fx.track(spawn_trainer(sys, 1, lock, fake_kernel(rec)));
  auto coord = fx.track(spawn_coordinator(sys, lock, {t0, t1}));
  auto stats = run_epochs(sys, coord, 0, 2);
  REQUIRE(stats.size() == 2);
  CHECK(stats[0].buckets == 4);
  CHECK(stats[1].buckets == 4);
  CHECK(stats[0].requeued + stats[1].requeued >= 1);
}

TEST_CASE("partition server: chunked get/put, a half-done put changes nothing") {
  system_fixture fx;
  auto& sys = *fx.sys;
  auto ps = fx.track(spawn_partition_server(sys));
  caf::scoped_actor self{sys};
  auto put = [&](msg::partition_chunk c) {
    std::optional<bool> out;
    self->request(ps, kTimeout, msg::put_atom::value, std::move(c))
        .receive([&](bool done) { out = done; }, [&](caf::error&) { out.reset(); });
    return out;
  };
  auto rows = [](int64_t n, int64_t dim, float base) {
    std::vector<float> e(static_cast<std::size_t>(n * dim)), s(static_cast<std::size_t>(n));
    for (std::size_t i = 0; i < e.size(); ++i) e[i] = base + static_cast<float>(i);
    for (std::size_t i = 0; i < s.size(); ++i) s[i] = base - static_cast<float>(i);
    return std::pair{tensor::make({n, dim}, std::move(e)), tensor::make({n}, std::move(s))};
  };
  msg::partition_key key{"node", 1};
  auto [e1, s1] = rows(10, 3, 0);
  REQUIRE(put({key, 0, 10, e1, s1}) == std::optional<bool>(true));
  // Fetch in chunks of 4 rows and reassemble.
  std::vector<float> got;
  for (uint64_t off = 0; off < 10; off += 4) {
    self->request(ps, kTimeout, msg::get_atom::value, key, off, uint64_t{4})
        .receive(
            [&](const msg::partition_chunk& c) {
              CHECK(c.row_offset == off);
              CHECK(c.total_rows == 10);
              got.insert(got.end(), c.embeddings.data->begin(), c.embeddings.data->end());
            },
            [&](caf::error& err) { FAIL(sys.render(err)); });
  }
  CHECK(got == *e1.data);
  // A new version in two chunks: only the last one commits.
  auto [e2, s2] = rows(10, 3, 100);
  auto first = [&](const tensor& t, int64_t n, int64_t dim) {
    return tensor::make({n, dim}, std::vector<float>(t.data->begin(), t.data->begin() + n * dim));
  };
  auto head_state = tensor::make({6}, std::vector<float>(s2.data->begin(), s2.data->begin() + 6));
  REQUIRE(put({key, 0, 10, first(e2, 6, 3), head_state}) == std::optional<bool>(false));
  // The writer dies here: the stored copy is still the old one.
  self->request(ps, kTimeout, msg::get_atom::value, key, uint64_t{0}, uint64_t{100})
      .receive([&](const msg::partition_chunk& c) { CHECK(c.embeddings == e1); },
               [&](caf::error& err) { FAIL(sys.render(err)); });
  // Bad chunks are refused.
  CHECK_FALSE(put({key, 7, 10, first(e2, 2, 3), tensor::make({2}, {0, 0})}).has_value());  // no first chunk
  CHECK_FALSE(put({key, 0, 10, tensor::make({2, 3}, {1, 2, 3}), tensor::make({2}, {0, 0})}).has_value());
  CHECK_FALSE(put({key, 0, 1, first(e2, 2, 3), tensor::make({2}, {0, 0})}).has_value());
  self->request(ps, kTimeout, msg::get_atom::value, msg::partition_key{"other", 0}, uint64_t{0}, uint64_t{1})
      .receive([&](const msg::partition_chunk&) { FAIL("unknown key answered"); }, [&](caf::error&) {});
}

TEST_CASE("parameter server: push returns the sum") {
  system_fixture fx;
  auto& sys = *fx.sys;
  auto ps = fx.track(spawn_parameter_server(sys));
  caf::scoped_actor self{sys};
  auto push = [&](std::vector<float> v) {
    std::vector<float> out;
    self->request(ps, kTimeout, msg::push_atom::value, std::string("rel0"), tensor::make({2}, std::move(v)))
        .receive([&](const tensor& t) { out = *t.data; }, [&](caf::error&) {});
    return out;
  };
  CHECK(push({1, 2}) == std::vector<float>{1, 2});
  CHECK(push({0.5f, -1}) == std::vector<float>{1.5f, 1});
  CHECK(push({1, 1, 1}).empty());  // shape mismatch refused
  self->request(ps, kTimeout, msg::pull_atom::value, std::string("rel0"))
      .receive([&](const tensor& t) { CHECK(*t.data == std::vector<float>{1.5f, 1}); },
               [&](caf::error& err) { FAIL(sys.render(err)); });
}

TEST_CASE("wire relays in front of the trainers and the coordinator: the same epochs, serialized copies") {
  system_fixture fx;
  auto& sys = *fx.sys;
  auto rec = std::make_shared<recorder>();
  scheduler_config cfg{.nparts_lhs = 2, .nparts_rhs = 3, .order = bucket_order::inside_out, .num_trainers = 2};
  auto lock = fx.track(spawn_lock_server(sys, cfg));
  // The fake kernel's stats, plus a held-out evaluation to carry.
  auto inner = fake_kernel(rec);
  kernel_fn kernel = [inner](const kernel_job& job, std::stop_token stop) {
    auto s = inner(job, stop);
    s.eval_after.add_edges(1);
    s.eval_after.add_rank(4);
    s.eval_after.add_loss(0.5, 1);
    return s;
  };
  std::vector<trainer_actor> trainers;
  for (uint32_t t = 0; t < 2; ++t)
    trainers.push_back(fx.track(spawn_wire_relay(sys, fx.track(spawn_trainer(sys, t, lock, kernel)))));
  auto coord = fx.track(spawn_wire_relay(sys, fx.track(spawn_coordinator(sys, lock, trainers))));
  auto stats = run_epochs(sys, coord, 0, 2);
  REQUIRE(stats.size() == 2);
  uint32_t total = 0;
  for (auto& e : stats) {
    CHECK(e.buckets == 6);
    REQUIRE(e.per_bucket.size() == 6);
    for (auto& b : e.per_bucket) {
      CHECK(b.eval_after.mrr() == 0.25);
      CHECK(b.eval_after.loss() == 0.5);
    }
    total += e.buckets;
  }
  caf::scoped_actor self{sys};
  uint32_t reported = 0;
  for (uint32_t t = 0; t < 2; ++t)
    self->request(trainers[t], kTimeout, msg::status_atom::value)
        .receive([&](trainer_status& s) {
                   CHECK(s.trainer == t);
                   CHECK_FALSE(s.busy);
                   reported += s.buckets_trained;
                 },
                 [&](caf::error& err) { FAIL("status failed: " << sys.render(err)); });
  CHECK(reported == total);
}
