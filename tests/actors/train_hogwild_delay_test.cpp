// run_training with num_machines = 2 simulated trainers: PBG's hogwild_delay
// makes trainer 1 (machine rank > 0) wait before each of its buckets in the
// first epoch only; trainer 0, and a one-machine run, never wait.
// LibTorch (through train.h) first: its glog CHECK macro must not replace doctest's.
#include "abg/node/run.h"

#include <doctest/doctest.h>

#include <mutex>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "abg/config.h"
#include "abg/import.h"
#include "tests/test_util.h"

using namespace abg;

namespace {

struct delay_run {
  abg::test::scratch_dir dir;
  std::string toml(int machines) const {
    return fmt::format(R"(entity_path = "{0}/ent"
edge_paths = ["{0}/edges"]
checkpoint_path = "{0}/model{1}"
dimension = 8
num_epochs = 2
eval_fraction = 0
workers = 1
seed = 3
num_machines = {1}
hogwild_delay = 0.02
[entities.node]
num_partitions = 4
[[relations]]
name = "r"
lhs = "node"
rhs = "node"
)",
                       dir.path().string(), machines);
  }
  config load(int machines) const {
    auto c = parse_config(toml(machines), "test.toml");
    REQUIRE_MESSAGE(c, (c ? "" : c.error().message));
    return c->value;
  }
  delay_run() {
    std::string text;
    for (int i = 0; i < 4000; ++i) text += fmt::format("n{}\tn{}\n", i % 400, (i * 7 + 1) % 400);
    abg::test::write_text(dir / "edges.tsv", text);
    import_options o;
    o.inputs = {dir / "edges.tsv"};
    o.lhs_col = 0;
    o.rhs_col = 1;
    auto imported = run_import(load(1), o);
    REQUIRE_MESSAGE(imported, (imported ? "" : imported.error().message));
  }
  // The wait lines logged during the first and the second epoch.
  std::pair<std::vector<std::string>, std::vector<std::string>> train(int machines) {
    std::mutex m;
    std::vector<std::string> waits;
    std::size_t after_first = 0;
    node::train_callbacks cb;
    cb.log = [&](std::string_view line) {
      std::lock_guard lock(m);
      if (line.find("waits hogwild_delay") != std::string_view::npos) waits.emplace_back(line);
    };
    cb.iteration_done = [&](const node::iteration_report& r) {
      std::lock_guard lock(m);
      if (r.epoch == 0) after_first = waits.size();
    };
    node::train_options options;
    options.seed = 3;
    auto s = node::run_simulation(load(machines), toml(machines), options, cb);
    REQUIRE_MESSAGE(s, (s ? "" : s.error().message));
    CHECK(s->iterations_run == 2);
    return {std::vector<std::string>(waits.begin(), waits.begin() + static_cast<std::ptrdiff_t>(after_first)),
            std::vector<std::string>(waits.begin() + static_cast<std::ptrdiff_t>(after_first), waits.end())};
  }
};

} // namespace

TEST_CASE("hogwild_delay: trainers of rank > 0 wait before each bucket of the first epoch only") {
  delay_run run;
  auto [first, second] = run.train(2);
  CHECK_FALSE(first.empty()); // trainer 1 trained at least one bucket of epoch 0
  CHECK(first.size() <= 16);
  for (auto& line : first) CHECK(line.find("trainer 1 waits hogwild_delay = 0.02 s") != std::string::npos);
  CHECK(second.empty());
  auto [one_first, one_second] = run.train(1);
  CHECK(one_first.empty()); // a single machine never waits
  CHECK(one_second.empty());
}
