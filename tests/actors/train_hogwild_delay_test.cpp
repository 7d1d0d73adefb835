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
#include "tests/actors/node_graph.h"

using namespace abg;

namespace {

struct delay_run {
  abg::test::node_graph graph;
  std::string toml(int machines) const {
    return graph.toml(fmt::format("model{}", machines), fmt::format("num_machines = {}\nhogwild_delay = 0.02", machines));
  }
  config load(int machines) const {
    return graph.load(fmt::format("model{}", machines), fmt::format("num_machines = {}\nhogwild_delay = 0.02", machines));
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
