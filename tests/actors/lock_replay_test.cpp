// The cluster simulator's lock server against the real one, with several
// trainers: every request the simulated trainers made (acquire, unlock,
// release, handed), replayed in the simulator's order against the lock
// server actor, gets the same answers: the same grants to the same trainers
// (buckets, write-backs, fetches, read-ahead, awaited partitions), the
// parked ones served by the same unlocks and releases, the same partitions
// handed over. What the trainers then load follows from the grants, and
// per trainer it is what the simulator counts. (The timing that orders the
// requests is the model's; simulator_vs_training_test.cpp checks a real
// trainer against the simulator where the order is deterministic.)
#include <doctest/doctest.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include <caf/all.hpp>

#include "actors/spawn.h"
#include "messages/interfaces.h"
#include "runtime/simulate/cluster_sim.h"

using namespace abg;
using simulate::lock_call;

namespace {

constexpr auto kTimeout = std::chrono::seconds(60);

struct scenario {
  std::int32_t parts = 4;
  bool shared = true;
  std::int32_t machines = 2;
  std::int32_t capacity = 0;
  schedule::bucket_order order = schedule::bucket_order::inside_out;
  std::uint64_t seed = 0;
};

simulate::graph_model graph_of(const scenario& s) {
  simulate::graph_model g;
  g.schedule.nparts_lhs = g.schedule.nparts_rhs = s.parts;
  g.schedule.shared_partitions = s.shared;
  g.schedule.order = s.order;
  g.schedule.seed = s.seed;
  g.schedule.buffer_capacity = s.capacity;
  // Uneven buckets, so the trainers' requests interleave in many ways.
  for (std::int32_t i = 0; i < s.parts * s.parts; ++i)
    g.bucket_edges.push_back(1000 + 613 * static_cast<std::uint64_t>((i * 7 + static_cast<std::int32_t>(s.seed)) % 13));
  g.partition_bytes[0].assign(static_cast<std::size_t>(s.parts), 3'000'000);
  if (!s.shared) g.partition_bytes[1].assign(static_cast<std::size_t>(s.parts), 5'000'000);
  return g;
}

bool same(const schedule::grant& a, const schedule::grant& b) {
  return a.what == b.what && a.epoch == b.epoch && a.assigned == b.assigned && a.drop == b.drop &&
         a.fetch == b.fetch && a.ahead == b.ahead && a.awaited == b.awaited;
}

struct replay_counts {
  std::size_t buckets = 0, parked_served = 0, handed = 0, awaited = 0;
};

replay_counts replay(const scenario& s) {
  const auto g = graph_of(s);
  simulate::cluster_model c;
  c.machines = s.machines;
  c.edges_per_second = 20'000;
  c.bandwidth = 1.25e8; // 1 Gbit/s: transfers take about as long as kernels
  std::vector<lock_call> calls;
  const auto f = simulate::simulate_epoch(g, c, 1, &calls);

  caf::actor_system_config cfg;
  msg::register_message_types(cfg);
  cfg.set("logger.console", caf::atom("none"));
  caf::actor_system sys{cfg};
  auto config = g.schedule;
  config.num_trainers = s.machines;
  actors::deadlines limits;
  limits.park = std::chrono::hours(1); // never `wait` for age: the simulator does not model it
  auto lock = actors::spawn_lock_server(sys, config, limits);
  // A failed REQUIRE leaves by an exception: the system's end waits for the lock server.
  struct stop_at_exit {
    msg::lock_server_actor lock;
    ~stop_at_exit() { caf::anon_send_exit(lock, caf::exit_reason::user_shutdown); }
  } stop{lock};
  caf::scoped_actor caller{sys};
  auto yes = [&](auto... xs) {
    bool out = false;
    caller->request(lock, kTimeout, xs...)
      .receive([&](bool b) { out = b; }, [&](caf::error& e) { FAIL(sys.render(e)); });
    return out;
  };
  // Each trainer a blocking actor: its acquires' answers come to its mailbox.
  std::vector<std::unique_ptr<caf::scoped_actor>> trainers;
  for (std::int32_t t = 0; t < s.machines; ++t) {
    trainers.push_back(std::make_unique<caf::scoped_actor>(sys));
    REQUIRE(yes(msg::enroll_atom::value, static_cast<std::uint32_t>(t), (*trainers.back())->address()));
  }
  REQUIRE(yes(msg::start_atom::value, std::int32_t{1}, std::vector<msg::bucket>{}));
  // Enrolling a trainer again is a no-op: its answer says the lock server
  // handled everything sent before it.
  auto handled = [&] { REQUIRE(yes(msg::enroll_atom::value, std::uint32_t{0}, (*trainers[0])->address())); };
  auto answered = [&](std::uint32_t t) {
    std::optional<schedule::grant> out;
    (*trainers[t])->receive([&](msg::grant& x) { out = std::move(x); }, caf::after(std::chrono::seconds(0)) >> [] {});
    return out;
  };

  replay_counts n;
  std::vector<std::int32_t> loads(static_cast<std::size_t>(s.machines), 0);
  for (std::size_t i = 0; i < calls.size(); ++i) {
    const auto& call = calls[i];
    CAPTURE(i);
    CAPTURE(call.trainer);
    switch (call.what) {
    case lock_call::kind::acquire:
      (*trainers[call.trainer])->send(lock, msg::acquire_atom::value, call.trainer);
      handled();
      break;
    case lock_call::kind::unlock:
      REQUIRE(yes(msg::unlock_atom::value, call.trainer, call.written));
      break;
    case lock_call::kind::release: {
      msg::bucket_stats stats;
      stats.trainer = call.trainer;
      stats.epoch = 1;
      stats.trained = call.trained;
      REQUIRE(yes(msg::release_atom::value, stats));
      break;
    }
    case lock_call::kind::handed:
      caller->request(lock, kTimeout, msg::handed_atom::value, call.trainer)
        .receive([&](std::vector<msg::part_version>& h) { CHECK(h == call.handed); },
                 [&](caf::error& e) { FAIL(sys.render(e)); });
      n.handed += call.handed.size();
      break;
    }
    // Every grant this request led to, to the trainer the simulator gave it.
    for (std::uint32_t t = 0; t < static_cast<std::uint32_t>(s.machines); ++t) {
      CAPTURE(t);
      std::optional<schedule::grant> expected;
      for (const auto& [to, gr] : call.grants)
        if (to == t) expected = gr;
      auto got = answered(t);
      REQUIRE(got.has_value() == expected.has_value());
      if (!got) continue;
      CHECK(same(*got, *expected));
      if (got->what != schedule::grant::kind::bucket) continue;
      ++n.buckets;
      if (call.what != lock_call::kind::acquire) ++n.parked_served;
      n.awaited += got->awaited.size();
      loads[t] += static_cast<std::int32_t>(got->fetch.size());
    }
  }
  CHECK(n.buckets == static_cast<std::size_t>(s.parts * s.parts));
  for (std::size_t t = 0; t < loads.size(); ++t) CHECK(loads[t] == f.machines[t].loads);
  return n;
}

} // namespace

TEST_CASE("the real lock server answers the simulated trainers' requests as the simulator did, several trainers") {
  replay_counts all;
  for (const auto& s : {
         scenario{.parts = 6, .shared = false, .machines = 3},
         scenario{.parts = 8, .shared = true, .machines = 4, .order = schedule::bucket_order::random, .seed = 3},
         scenario{.parts = 4, .shared = true, .machines = 2, .capacity = 4, .order = schedule::bucket_order::buffer},
         scenario{.parts = 8, .shared = true, .machines = 4, .capacity = 4, .order = schedule::bucket_order::buffer, .seed = 1},
         scenario{.parts = 16, .shared = true, .machines = 8, .capacity = 4, .order = schedule::bucket_order::buffer, .seed = 2},
         scenario{.parts = 6, .shared = false, .machines = 3, .capacity = 4, .order = schedule::bucket_order::inside_out},
       }) {
    CAPTURE(s.parts);
    CAPTURE(s.machines);
    CAPTURE(s.capacity);
    auto n = replay(s);
    all.buckets += n.buckets;
    all.parked_served += n.parked_served;
    all.handed += n.handed;
    all.awaited += n.awaited;
  }
  // The scenarios reach what differs from one trainer: parked trainers
  // served by others' unlocks and releases, and reservations awaiting
  // partitions handed over.
  CHECK(all.parked_served > 0);
  CHECK(all.awaited > 0);
  CHECK(all.handed > 0);
}
