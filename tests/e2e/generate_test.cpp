// End to end through the CLI: `abg generate` writes a graph that `abg import`
// takes as it is, and refuses bad options naming them.
#include <doctest/doctest.h>

#include <filesystem>
#include <string>

#include "abg/storage/entity_store.h"
#include "tests/e2e/cli.h"
#include "tests/test_util.h"

namespace fs = std::filesystem;

TEST_CASE("abg generate writes a graph that abg import takes; bad options are refused by name") {
  abg::test::scratch_dir dir;
  auto generated = abg::test::run_abg({"generate", "g.tsv", "--entities", "2000", "--edges", "20000", "--relations",
                                       "3", "--seed", "9", "--threads", "2"},
                                      dir.path());
  INFO(generated.err);
  REQUIRE(generated.exit_code == 0);
  CHECK(generated.err.find("wrote 20000 edges (2000 entities, 3 relations, power law 0.8, seed 9)") !=
        std::string::npos);
  abg::test::write_text(dir / "g.toml", R"(entity_path = "data/g"
edge_paths = ["data/g/train"]
checkpoint_path = "model/g"
dimension = 8
dynamic_relations = true
[entities.node]
num_partitions = 2
[[relations]]
name = "any"
lhs = "node"
rhs = "node"
)");
  auto imported = abg::test::run_abg({"import", "g.toml", "g.tsv", "--lhs-col", "0", "--rel-col", "1", "--rhs-col",
                                      "2"},
                                     dir.path());
  INFO(imported.err);
  REQUIRE(imported.exit_code == 0);
  auto meta = abg::storage::read_entity_meta(dir / "data/g");
  REQUIRE(meta.has_value());
  REQUIRE(meta->types.size() == 1);
  // Zipf draws reach most of 2000 entities in 40000 edge ends, never more.
  CHECK(meta->types[0].total() <= 2000);
  CHECK(meta->types[0].total() > 1500);
  CHECK(meta->relation_names.size() == 3);

  auto bad = abg::test::run_abg({"generate", "x.tsv", "--entities", "1", "--edges", "5"}, dir.path());
  CHECK(bad.exit_code == 1);
  CHECK(bad.err.find("--entities 1: give between 2 and") != std::string::npos);
  CHECK_FALSE(fs::exists(dir / "x.tsv"));
}
