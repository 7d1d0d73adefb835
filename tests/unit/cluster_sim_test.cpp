// The cluster simulator against what is deterministic: with one machine it
// hands out the real scheduler's bucket sequence, fetches what the trainer
// would fetch and trains for exactly the edges over the rate; with several,
// every bucket once, bytes sent = bytes received, never faster than the
// kernels allow, identical twice, and a slow link or a gathered checkpoint
// costs what it should; with a partition buffer, the real scheduler's loads
// and read-ahead, the disk's time beside the kernels' and the buffer as the
// memory.
#include <doctest/doctest.h>

#include <map>
#include <numeric>
#include <set>

#include "runtime/simulate/cluster_sim.h"

using namespace abg;
using schedule::bucket;

namespace {

// P x P buckets of uneven sizes over two entity types (lhs and rhs locked apart).
simulate::graph_model graph(std::int32_t parts, bool shared = false) {
  simulate::graph_model g;
  g.schedule.nparts_lhs = g.schedule.nparts_rhs = parts;
  g.schedule.shared_partitions = shared;
  for (std::int32_t i = 0; i < parts * parts; ++i) g.bucket_edges.push_back(1000 + 37 * static_cast<std::uint64_t>(i % 11));
  g.partition_bytes[0].assign(static_cast<std::size_t>(parts), 4'000'000);
  if (!shared) g.partition_bytes[1].assign(static_cast<std::size_t>(parts), 2'000'000);
  g.shared_bytes = 10'000;
  g.schedule.seed = 5;
  return g;
}

std::uint64_t total_edges(const simulate::graph_model& g) {
  return std::accumulate(g.bucket_edges.begin(), g.bucket_edges.end(), std::uint64_t{0});
}

} // namespace

TEST_CASE("simulator, one machine: the scheduler's sequence, the trainer's fetches, the kernel's time") {
  for (bool shared : {false, true}) {
    auto g = graph(4, shared);
    simulate::cluster_model c;
    c.edges_per_second = 50'000;
    auto f = simulate::simulate_epoch(g, c);
    // The real scheduler, one trainer: acquire, release, in order.
    schedule::scheduler_config sc;
    sc.nparts_lhs = sc.nparts_rhs = 4;
    sc.shared_partitions = shared;
    sc.seed = g.schedule.seed;
    schedule::bucket_scheduler real(sc);
    real.start_epoch(1);
    std::vector<bucket> expected;
    std::int32_t fetches = 0;
    for (;;) {
      auto gr = real.acquire(0);
      if (gr.what != schedule::grant::kind::bucket) break;
      expected.push_back(gr.assigned);
      fetches += static_cast<std::int32_t>(gr.fetch.size());
      std::vector<schedule::part_version> written;
      for (auto k : gr.drop) written.push_back({k, real.version(k) + 1});
      REQUIRE(real.unlock(0, written));
      REQUIRE(real.release(0, gr.assigned));
    }
    REQUIRE(f.sequence.size() == expected.size());
    for (std::size_t i = 0; i < expected.size(); ++i) {
      CHECK(f.sequence[i].first == 0);
      CHECK(f.sequence[i].second == expected[i]);
    }
    REQUIRE(f.machines.size() == 1);
    CHECK(f.machines[0].loads == fetches);
    CHECK(f.machines[0].buckets == 16);
    // No network on one machine: training is the kernels, exactly.
    CHECK(f.training_seconds == doctest::Approx(static_cast<double>(total_edges(g)) / c.edges_per_second));
    CHECK(f.machines[0].bytes_sent == 0);
    CHECK(f.machines[0].bytes_received == 0);
  }
}

TEST_CASE("simulator, several machines: every bucket once, bytes balance, bounded by the kernels, deterministic") {
  auto g = graph(8);
  simulate::cluster_model c;
  c.edges_per_second = 20'000;
  c.bandwidth = 1.25e8; // 1 Gbit/s
  for (std::int32_t m : {2, 4}) {
    c.machines = m;
    auto f = simulate::simulate_epoch(g, c);
    std::set<bucket> seen;
    for (auto& [t, b] : f.sequence) {
      CHECK(t < static_cast<std::uint32_t>(m));
      CHECK(seen.insert(b).second);
    }
    CHECK(seen.size() == 64);
    std::uint64_t sent = 0, received = 0;
    double kernels = 0;
    for (auto& x : f.machines) {
      sent += x.bytes_sent;
      received += x.bytes_received;
      kernels += x.kernel_seconds;
      CHECK(x.buckets > 0);
      CHECK(x.idle_fraction >= 0);
      CHECK(x.idle_fraction < 1);
    }
    CHECK(sent == received);
    CHECK(sent > 0);
    CHECK(kernels == doctest::Approx(static_cast<double>(total_edges(g)) / c.edges_per_second));
    CHECK(f.training_seconds >= kernels / m);
    auto again = simulate::simulate_epoch(g, c);
    CHECK(again.sequence == f.sequence);
    CHECK(again.seconds == f.seconds);
  }
}

TEST_CASE("simulator: a slower link and a gathered checkpoint cost time; local checkpoints do not cross machines") {
  auto g = graph(8);
  simulate::cluster_model fast;
  fast.machines = 4;
  fast.edges_per_second = 20'000;
  fast.bandwidth = 1.25e10;
  auto slow = fast;
  slow.bandwidth = 1.25e7; // 100 Mbit/s: swaps dominate
  const auto f = simulate::simulate_epoch(g, fast), s = simulate::simulate_epoch(g, slow);
  CHECK(s.training_seconds > 2 * f.training_seconds);
  auto local = fast;
  local.local_checkpoints = true;
  const auto l = simulate::simulate_epoch(g, local);
  CHECK(l.commit_seconds < f.commit_seconds);
  // Gathered: machine 0 receives every partition not its own server's.
  std::uint64_t gathered = 0;
  for (std::size_t p = 0; p < 8; ++p)
    if (p % 4 != 0) gathered += g.partition_bytes[0][p] + g.partition_bytes[1][p];
  CHECK(f.machines[0].bytes_received - l.machines[0].bytes_received == gathered);
}

TEST_CASE("simulator with a partition buffer: the real scheduler's loads and read-ahead, disk I/O beside the kernel") {
  auto g = graph(16, true);
  g.schedule.buffer_capacity = 4;
  g.schedule.order = schedule::bucket_order::buffer;
  // The real scheduler, one trainer: loads, and those the grant before named to read ahead.
  schedule::bucket_scheduler real(g.schedule);
  real.start_epoch(1);
  std::int32_t loads = 0, ahead = 0;
  std::vector<schedule::part_version> hinted;
  for (;;) {
    auto gr = real.acquire(0);
    if (gr.what != schedule::grant::kind::bucket) break;
    for (auto& v : gr.fetch) {
      ++loads;
      ahead += std::any_of(hinted.begin(), hinted.end(), [&](auto& h) { return h.key == v.key; });
    }
    hinted = gr.ahead;
    std::vector<schedule::part_version> written;
    for (auto k : gr.drop) written.push_back({k, real.version(k) + 1});
    REQUIRE(real.unlock(0, written));
    REQUIRE(real.release(0, gr.assigned));
  }
  REQUIRE(ahead > 0);
  simulate::cluster_model c;
  c.edges_per_second = 50'000;
  const double kernels = static_cast<double>(total_edges(g)) / c.edges_per_second;
  // A disk that keeps up: the kernel waits only for the first bucket's loads.
  c.disk_bandwidth = 1e12;
  auto fast = simulate::simulate_epoch(g, c);
  CHECK(fast.machines[0].loads == loads);
  CHECK(fast.machines[0].read_ahead == ahead);
  CHECK(fast.training_seconds == doctest::Approx(kernels).epsilon(0.001));
  // In memory: the buffer (4 partitions at most, the read-ahead slot's
  // included), not the server's 16, which are on disk.
  CHECK(fast.machines[0].memory_bytes <= 4 * 4'000'000 + g.shared_bytes);
  CHECK(fast.machines[0].memory_bytes >= 2 * 4'000'000);
  // A disk as slow as the kernels: every load and write-back goes through the
  // one disk, so the epoch takes at least the disk's time and at least the
  // kernels', and reading ahead beside the kernels makes it shorter than both
  // one after the other.
  const double per_load = 4'000'000.0 / (kernels / loads);
  c.disk_bandwidth = per_load;
  auto slow = simulate::simulate_epoch(g, c);
  CHECK(slow.sequence == fast.sequence);
  const double disk = static_cast<double>(slow.swap_bytes) / c.disk_bandwidth;
  CHECK(slow.training_seconds >= kernels);
  CHECK(slow.training_seconds >= disk * 0.999);
  CHECK(slow.training_seconds < 0.9 * (kernels + disk));
  CHECK(slow.machines[0].waited_seconds > 0);
  CHECK(slow.machines[0].waited_seconds == doctest::Approx(slow.training_seconds - kernels).epsilon(0.001));
  // No buffer: partitions in memory, no disk in the epoch.
  g.schedule.buffer_capacity = 0;
  g.schedule.order = schedule::scheduler_config{}.order;
  auto memory = simulate::simulate_epoch(g, c);
  CHECK(memory.machines[0].read_ahead == 0);
  CHECK(memory.training_seconds == doctest::Approx(kernels));
  CHECK(memory.machines[0].memory_bytes >= 16 * 4'000'000);
}

TEST_CASE("simulator with a partition buffer and several machines: each trainer reads its reserved bucket ahead") {
  auto g = graph(8);
  g.schedule.buffer_capacity = 4;
  simulate::cluster_model c;
  c.edges_per_second = 50'000;
  c.machines = 2;
  c.disk_bandwidth = 1e12;
  auto f = simulate::simulate_epoch(g, c);
  std::set<bucket> trained;
  for (auto& [t, b] : f.sequence) CHECK(trained.insert(b).second);
  CHECK(trained.size() == 64);
  std::int32_t loads = 0, ahead = 0;
  for (auto& m : f.machines) {
    loads += m.loads;
    ahead += m.read_ahead;
    CHECK(m.read_ahead > 0);
    // The bucket's two partitions and the reserved bucket's two read ahead, at most.
    CHECK(m.memory_bytes <= 2 * 4'000'000 + 2 * 2'000'000 + g.shared_bytes);
  }
  MESSAGE(ahead << " of " << loads << " loads read ahead");
  CHECK(ahead * 10 >= loads * 7);
}

TEST_CASE("simulator, P = 2 x machines with a partition buffer: reservations await what others hold, nothing stalls") {
  for (bool shared : {false, true})
    for (std::int32_t machines : {2, 4}) {
      CAPTURE(shared);
      CAPTURE(machines);
      auto g = graph(2 * machines, shared);
      g.schedule.buffer_capacity = 4;
      simulate::cluster_model c;
      c.edges_per_second = 50'000;
      c.machines = machines;
      c.disk_bandwidth = 1e9;
      auto f = simulate::simulate_epoch(g, c);  // throws when no trainer can go on
      std::set<bucket> trained;
      for (auto& [t, b] : f.sequence) CHECK(trained.insert(b).second);
      CHECK(trained.size() == static_cast<std::size_t>(4 * machines * machines));
      std::int32_t loads = 0, ahead = 0;
      for (auto& m : f.machines) {
        loads += m.loads;
        ahead += m.read_ahead;
      }
      MESSAGE(ahead << " of " << loads << " loads read ahead");
      // Most loads were read ahead: with shared partitions, reserving only
      // free partitions read 3 of 10 (2 machines) and 10 of 42 (4) ahead.
      CHECK(ahead * 2 >= loads);
    }
}
