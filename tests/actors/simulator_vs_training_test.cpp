// The cluster simulator against a real run of the same config and seed, in
// what is deterministic: one machine's lock server and trainer (run in one
// process) hand out the simulated epoch's bucket sequence, and the trainer
// loads, and reads ahead, as many partitions as the simulator counts, each
// of the bytes the simulator gives it; with and without a partition buffer.
#include "abg/node/run.h"

#include <doctest/doctest.h>

#include <mutex>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "abg/config.h"
#include "abg/storage/entity_store.h"
#include "runtime/simulate/graph_of.h"
#include "tests/actors/node_graph.h"

using namespace abg;

namespace {

// A buffer of 3 partitions trains in the buffer order; none in inside_out.
std::string keys(int capacity) {
  return fmt::format("buffer_capacity = {}\nbucket_order = \"{}\"", capacity, capacity > 0 ? "buffer" : "inside_out");
}

struct epoch_seen {
  std::vector<std::pair<std::uint32_t, schedule::bucket>> sequence;
  std::int64_t loads = 0, read_ahead = 0;
};

} // namespace

TEST_CASE("simulator against a real run: the same bucket sequence, loads, read-ahead and partition bytes") {
  abg::test::node_graph run;
  for (int capacity : {0, 3}) {
    CAPTURE(capacity);
    const auto model = fmt::format("model{}", capacity);
    const auto cfg = run.load(model, keys(capacity));
    // The real run: the second epoch (the simulator models a steady-state one).
    std::mutex m;
    epoch_seen real;
    node::train_callbacks cb;
    cb.bucket_done = [&](const node::bucket_report& r) {
      std::lock_guard lock(m);
      if (r.iteration == 1) real.sequence.emplace_back(r.trainer, schedule::bucket{r.lhs, r.rhs});
    };
    cb.iteration_done = [&](const node::iteration_report& r) {
      std::lock_guard lock(m);
      if (r.iteration != 1) return;
      real.loads = r.loads;
      real.read_ahead = r.read_ahead;
    };
    node::train_options options;
    options.seed = 3;
    auto s = node::run_simulation(cfg, run.toml(model, keys(capacity)), options, cb);
    REQUIRE_MESSAGE(s, (s ? "" : s.error().message));
    REQUIRE(s->iterations_run == 2);

    auto graph = simulate::graph_of(cfg, std::nullopt);
    REQUIRE_MESSAGE(graph, (graph ? "" : graph.error().message));
    simulate::cluster_model one;
    auto f = simulate::simulate_epoch(*graph, one, 1);
    REQUIRE(f.machines.size() == 1);
    CHECK(f.sequence == real.sequence);
    CHECK(f.sequence.size() == 16);
    CHECK(f.machines[0].loads == real.loads);
    CHECK(f.machines[0].read_ahead == real.read_ahead);
    if (capacity > 0) CHECK(real.read_ahead > 0);
    // Each partition's bytes as the trainer moves them: its entities' rows
    // of embedding (dimension 8) and row-wise Adagrad state (one float).
    auto meta = storage::read_entity_meta(cfg.entity_path);
    REQUIRE_MESSAGE(meta, (meta ? "" : meta.error().message));
    REQUIRE(meta->types.size() == 1);
    REQUIRE(meta->types[0].counts.size() == 4);
    for (std::size_t p = 0; p < 4; ++p)
      CHECK(graph->partition_bytes[0][p] ==
            static_cast<std::uint64_t>(meta->types[0].counts[p]) * (8 + 1) * sizeof(float));
  }
}
