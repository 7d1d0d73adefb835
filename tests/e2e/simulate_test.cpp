// End to end through the CLI: `abg simulate` takes the kernel's speed from
// --edges-per-second, else from the checkpoint's training_stats.json, else
// from a short run of the kernel it starts itself (--short-run forces it).
#include <doctest/doctest.h>

#include <string>

#include <nlohmann/json.hpp>

#include "tests/e2e/cli.h"
#include "tests/test_util.h"

TEST_CASE("abg simulate: the kernel's speed given, recorded, or from a short run") {
  abg::test::scratch_dir dir;
  abg::test::write_text(dir / "g.toml", R"(entity_path = "data/g"
edge_paths = ["data/g/train"]
checkpoint_path = "model/g"
dimension = 16
workers = 1
eval_fraction = 0
dynamic_relations = true
[entities.node]
num_partitions = 2
[[relations]]
name = "r"
lhs = "node"
rhs = "node"
operator = "translation"
)");
  auto gen = abg::test::run_abg({"generate", "g.tsv", "--entities", "2000", "--edges", "20000", "--relations", "3",
                                 "--seed", "1"},
                                dir.path());
  REQUIRE(gen.exit_code == 0);
  auto imp = abg::test::run_abg({"import", "g.toml", "g.tsv", "--lhs-col", "0", "--rel-col", "1", "--rhs-col", "2"},
                                dir.path());
  INFO(imp.err);
  REQUIRE(imp.exit_code == 0);

  // No checkpoint yet: a short run.
  auto fresh = abg::test::run_abg({"simulate", "g.toml", "--machines", "1,2"}, dir.path());
  INFO(fresh.err);
  REQUIRE(fresh.exit_code == 0);
  CHECK(fresh.out.find("(measured: a short run of the kernel, ") != std::string::npos);
  CHECK(fresh.out.find("with 1 worker(s))") != std::string::npos);

  auto json = abg::test::run_abg({"simulate", "g.toml", "--machines", "1,2", "--json"}, dir.path());
  REQUIRE(json.exit_code == 0);
  auto rows = nlohmann::json::parse(json.out);
  REQUIRE(rows.size() == 2);
  CHECK(rows[0]["epoch_seconds"].get<double>() > 0);
  CHECK(rows[1]["machines"].get<int>() == 2);

  // After an epoch: the recorded speed, unless --short-run.
  auto train = abg::test::run_abg({"train", "g.toml", "-p", "num_epochs=1"}, dir.path());
  INFO(train.err);
  REQUIRE(train.exit_code == 0);
  auto recorded = abg::test::run_abg({"simulate", "g.toml", "--machines", "1"}, dir.path());
  REQUIRE(recorded.exit_code == 0);
  CHECK(recorded.out.find("(measured: 1 iteration(s) of training_stats.json)") != std::string::npos);
  auto forced = abg::test::run_abg({"simulate", "g.toml", "--machines", "1", "--short-run"}, dir.path());
  REQUIRE(forced.exit_code == 0);
  CHECK(forced.out.find("(measured: a short run of the kernel, ") != std::string::npos);
  auto given = abg::test::run_abg({"simulate", "g.toml", "--machines", "1", "--edges-per-second", "1000"}, dir.path());
  REQUIRE(given.exit_code == 0);
  CHECK(given.out.find("one trainer 1000 edges/s (given)") != std::string::npos);
  CHECK(given.err.find("not modelled") == std::string::npos);
  // Commits within an iteration are not modelled, and it says so.
  auto often = abg::test::run_abg(
    {"simulate", "g.toml", "--machines", "1", "--edges-per-second", "1000", "-p", "checkpoint_every_buckets=4"},
    dir.path());
  REQUIRE(often.exit_code == 0);
  CHECK(often.err.find("checkpoint_every_buckets = 4 is not modelled") != std::string::npos);

  auto both = abg::test::run_abg({"simulate", "g.toml", "--short-run", "--edges-per-second", "1000"}, dir.path());
  CHECK(both.exit_code == 1);
  CHECK(both.err.find("--edges-per-second and --short-run both set the kernel's speed; give one") !=
        std::string::npos);
}
