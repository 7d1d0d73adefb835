// The cluster simulator against a real run of the same config and seed, in
// what is deterministic: one machine's lock server and trainer (run in one
// process) hand out the simulated epoch's bucket sequence, and the trainer
// loads, and reads ahead, as many partitions as the simulator counts, each
// of the bytes the simulator gives it; with and without a partition buffer.
#include "abg/node/run.h"

#include <doctest/doctest.h>

#include <filesystem>
#include <mutex>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "abg/config.h"
#include "abg/import.h"
#include "abg/storage/entity_store.h"
#include "runtime/simulate/graph_of.h"
#include "tests/test_util.h"

using namespace abg;

namespace {

struct sim_run {
  abg::test::scratch_dir dir;
  std::string toml(int capacity) const {
    return fmt::format(R"(entity_path = "{0}/ent"
edge_paths = ["{0}/edges"]
checkpoint_path = "{0}/model{1}"
dimension = 8
num_epochs = 2
eval_fraction = 0
workers = 1
seed = 3
buffer_capacity = {1}
bucket_order = "{2}"
[entities.node]
num_partitions = 4
[[relations]]
name = "r"
lhs = "node"
rhs = "node"
)",
                       dir.path().string(), capacity, capacity > 0 ? "buffer" : "inside_out");
  }
  config load(int capacity) const {
    auto c = parse_config(toml(capacity), "test.toml");
    REQUIRE_MESSAGE(c, (c ? "" : c.error().message));
    return c->value;
  }
  sim_run() {
    // Uneven buckets: a skewed graph over 400 entities.
    std::string text;
    for (int i = 0; i < 4000; ++i) text += fmt::format("n{}\tn{}\n", (i * i) % 400, (i * 7 + 1) % 400);
    abg::test::write_text(dir / "edges.tsv", text);
    import_options o;
    o.inputs = {dir / "edges.tsv"};
    o.lhs_col = 0;
    o.rhs_col = 1;
    auto imported = run_import(load(0), o);
    REQUIRE_MESSAGE(imported, (imported ? "" : imported.error().message));
  }
};

struct epoch_seen {
  std::vector<std::pair<std::uint32_t, schedule::bucket>> sequence;
  std::int64_t loads = 0, read_ahead = 0;
};

} // namespace

TEST_CASE("simulator against a real run: the same bucket sequence, loads, read-ahead and partition bytes") {
  sim_run run;
  for (int capacity : {0, 3}) {
    CAPTURE(capacity);
    const auto cfg = run.load(capacity);
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
    auto s = node::run_simulation(cfg, run.toml(capacity), options, cb);
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
