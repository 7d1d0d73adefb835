// End to end through the CLI, where the machine allows a cgroup of its own
// (root, the v1 memory controller): a generated graph whose model (1M
// entities x 128 floats and their optimizer state, 516 MB) is larger than the
// run's memory limit (450 MiB) trains with a partition buffer of 2 of its 8
// partitions, and gives the very tables of a run without limit; without the
// buffer the same limit kills the run. Under the same limit, abg eval
// (sampled, and filtered against every entity), abg export and abg neighbors
// read that checkpoint, eval with the figures it gives without a limit. Says plainly when it skips.
#include <doctest/doctest.h>

#include <algorithm>
#include <csignal>
#include <map>
#include <sstream>
#include <string>

#include <fmt/format.h>

#include "abg/storage/checkpoint.h"
#include "tests/e2e/checkpoints.h"
#include "tests/e2e/cli.h"
#include "tests/e2e/memory_cgroup.h"
#include "tests/test_util.h"

namespace {

constexpr const char* graph_config = R"(entity_path = "data/g"
edge_paths = ["data/g/train"]
checkpoint_path = "model/g"
dimension = 128
num_epochs = 1
dynamic_relations = true
workers = 1
seed = 1
eval_fraction = 0
[entities.node]
num_partitions = 8
[[relations]]
name = "any"
lhs = "node"
rhs = "node"
)";

constexpr std::uint64_t limit = 450ull << 20;

// An abg command inside a fresh cgroup limited to `limit`: its wait status, what the kernel counted and its output.
struct limited_run {
  int status = -1;
  std::uint64_t max_usage = 0, oom_kills = 0;
  std::string err, out;
  bool ok() const { return oom_kills == 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0; }
};
limited_run run_limited(const std::filesystem::path& dir, const std::vector<std::string>& args) {
  abg::test::memory_cgroup group(limit);
  REQUIRE_MESSAGE(group.why_not().empty(), group.why_not());
  abg::test::abg_process run(args, dir, dir / "limited.err", group.wrapper(dir / "limited.out"));
  auto status = run.wait_for(std::chrono::minutes(5));
  REQUIRE(status.has_value());
  return {*status, group.max_usage(), group.oom_kills(), abg::test::read_file(dir / "limited.err"),
          abg::test::read_file(dir / "limited.out")};
}
limited_run train_limited(const std::filesystem::path& dir, const std::vector<std::string>& params) {
  std::vector<std::string> args{"train", "g.toml"};
  args.insert(args.end(), params.begin(), params.end());
  return run_limited(dir, args);
}

} // namespace

TEST_CASE("abg train under a memory limit smaller than the model: a buffer of 2 partitions gives the tables of an "
          "unlimited run") {
  {
    abg::test::memory_cgroup probe(limit);
    if (!probe.why_not().empty()) {
      MESSAGE("skipped: a memory cgroup cannot be made here: " << probe.why_not());
      return;
    }
  }
  abg::test::scratch_dir dir;
  abg::test::write_text(dir / "g.toml", graph_config);
  auto generated = abg::test::run_abg({"generate", "--direct", "g.toml", "--entities", "1000000", "--edges", "1000000",
                                       "--relations", "4", "--seed", "3"},
                                      dir.path());
  INFO(generated.err);
  REQUIRE(generated.exit_code == 0);

  auto unlimited = abg::test::run_abg({"train", "g.toml", "-p", "checkpoint_path=model/unlimited"}, dir.path());
  INFO(unlimited.err);
  REQUIRE(unlimited.exit_code == 0);

  auto buffered = train_limited(dir.path(), {"-p", "checkpoint_path=model/buffered", "-p", "buffer_capacity=2"});
  INFO(buffered.err);
  CHECK(buffered.oom_kills == 0);
  REQUIRE(WIFEXITED(buffered.status));
  REQUIRE(WEXITSTATUS(buffered.status) == 0);
  CHECK(buffered.max_usage <= limit);
  MESSAGE(fmt::format("with buffer_capacity = 2 under a {} MiB limit: the cgroup's peak {} MiB", limit >> 20,
                      buffered.max_usage >> 20));
  const auto expected = abg::test::table_checksums(dir / "model/unlimited");
  CHECK(expected.size() == 16);
  CHECK(abg::test::table_checksums(dir / "model/buffered") == expected);

  // Read under the same limit: the tables are mapped, never copied whole.
  const std::vector<std::string> eval{"eval", "g.toml", "--json", "-p", "checkpoint_path=model/buffered"};
  auto free_eval = abg::test::run_abg(eval, dir.path());
  INFO(free_eval.err);
  REQUIRE(free_eval.exit_code == 0);
  auto limited_eval = run_limited(dir.path(), eval);
  INFO(limited_eval.err);
  CHECK(limited_eval.ok());
  CHECK(limited_eval.out == free_eval.out);  // the same figures, to the last digit
  auto exported = run_limited(dir.path(), {"export", "g.toml", "--format", "npy", "--entities-output", "out", "-p",
                                           "checkpoint_path=model/buffered"});
  INFO(exported.err);
  CHECK(exported.ok());
  const auto names = abg::test::read_file(dir / "out" / "names_node_7.txt");
  REQUIRE_FALSE(names.empty());
  // Filtered ranking against all 1M entities, on a few edges imported beside
  // the training edges: the candidates are scored a partition at a time, no
  // type copied whole (a copy alone would pass the limit).
  const auto last_names = abg::test::read_file(dir / "out" / "names_node_0.txt");
  std::istringstream heads(names), tails(last_names);
  std::string probe, head, tail;
  for (int i = 0; i < 5 && std::getline(heads, head) && std::getline(tails, tail); ++i)
    probe += fmt::format("{}\tr0\t{}\n", head, tail);
  abg::test::write_text(dir / "probe.tsv", probe);
  auto imported = abg::test::run_abg({"import", "g.toml", "probe.tsv", "--lhs-col", "0", "--rel-col", "1", "--rhs-col",
                                      "2", "-p", "edge_paths=data/g/probe"},
                                     dir.path());
  INFO(imported.err);
  REQUIRE(imported.exit_code == 0);
  const std::vector<std::string> filtered{"eval", "g.toml", "--filtered", "--edge-path", "data/g/probe", "--json",
                                          "-p", "checkpoint_path=model/buffered"};
  auto free_filtered = abg::test::run_abg(filtered, dir.path());
  INFO(free_filtered.err);
  REQUIRE(free_filtered.exit_code == 0);
  CHECK(free_filtered.out.find("\"count\":5") != std::string::npos);
  auto limited_filtered = run_limited(dir.path(), filtered);
  INFO(limited_filtered.err);
  CHECK(limited_filtered.ok());
  CHECK(limited_filtered.out == free_filtered.out);
  MESSAGE(fmt::format("abg eval --filtered under the {} MiB limit: the cgroup's peak {} MiB", limit >> 20,
                      limited_filtered.max_usage >> 20));
  auto near = run_limited(dir.path(), {"neighbors", "g.toml", names.substr(0, names.find('\n')), "--k", "5", "-p",
                                       "checkpoint_path=model/buffered"});
  INFO(near.err);
  CHECK(near.ok());
  CHECK(std::count(near.out.begin(), near.out.end(), '\n') >= 5);

  // The model does not fit: without the buffer the kernel kills the run.
  auto unbuffered = train_limited(dir.path(), {"-p", "checkpoint_path=model/unbuffered"});
  CHECK(unbuffered.oom_kills >= 1);
  CHECK_FALSE((WIFEXITED(unbuffered.status) && WEXITSTATUS(unbuffered.status) == 0));
}
