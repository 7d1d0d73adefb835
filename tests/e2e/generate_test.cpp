// End to end through the CLI: `abg generate` writes a graph that `abg import`
// takes as it is, `--direct` writes the same edges straight into a dataset
// that trains, and bad options are refused naming them.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "abg/storage/bucket_file.h"
#include "abg/storage/edge_manifest.h"
#include "abg/storage/entity_store.h"
#include <fmt/format.h>

#include "tests/e2e/cli.h"
#include "tests/test_util.h"

namespace fs = std::filesystem;

namespace {

// One entity type in 2 partitions, dynamic relations: what a generated graph fills.
constexpr const char* dataset_config = R"(entity_path = "data/{0}"
edge_paths = ["data/{0}/train"]
checkpoint_path = "model/{0}"
dimension = 8
num_epochs = 1
dynamic_relations = true
[entities.node]
num_partitions = 2
[[relations]]
name = "any"
lhs = "node"
rhs = "node"
)";

} // namespace

TEST_CASE("abg generate writes a graph that abg import takes; bad options are refused by name") {
  abg::test::scratch_dir dir;
  auto generated = abg::test::run_abg({"generate", "g.tsv", "--entities", "2000", "--edges", "20000", "--relations",
                                       "3", "--seed", "9", "--threads", "2"},
                                      dir.path());
  INFO(generated.err);
  REQUIRE(generated.exit_code == 0);
  CHECK(generated.err.find("wrote 20000 edges (2000 entities, 3 relations, power law 0.8, seed 9)") !=
        std::string::npos);
  abg::test::write_text(dir / "g.toml", fmt::format(dataset_config, "g"));
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

namespace {

// Every edge of an imported edge path as "head<TAB>relation<TAB>tail", sorted.
std::vector<std::string> edges_by_name(const fs::path& dir, const std::string& name) {
  auto meta = abg::storage::read_entity_meta(dir / "data" / name);
  REQUIRE(meta.has_value());
  std::vector<std::vector<std::string>> names;
  for (std::int64_t p = 0; p < meta->types[0].num_partitions(); ++p) {
    auto n = abg::storage::read_entity_names(dir / "data" / name, *meta, meta->types[0].name, p);
    REQUIRE(n.has_value());
    names.push_back(std::move(*n));
  }
  auto manifest = abg::storage::read_edge_manifest(dir / "data" / name / "train");
  REQUIRE(manifest.has_value());
  std::vector<std::string> out;
  for (auto& b : manifest->buckets) {
    auto r = abg::storage::bucket_reader::open(dir / "data" / name / "train" / b.file, &meta->id);
    REQUIRE(r.has_value());
    for (std::uint64_t i = 0; i < r->size(); ++i)
      out.push_back(names[static_cast<std::size_t>(b.lhs)][r->lhs(i)] + "\t" + meta->relation_names[r->rel(i)] +
                    "\t" + names[static_cast<std::size_t>(b.rhs)][r->rhs(i)]);
  }
  std::sort(out.begin(), out.end());
  return out;
}

} // namespace

TEST_CASE("abg generate --direct writes the edges the TSV and abg import give, into a dataset that trains") {
  abg::test::scratch_dir dir;
  const std::vector<std::string> graph{"--entities", "3000", "--edges", "20000", "--relations", "4", "--seed", "4"};
  auto args = [&](std::vector<std::string> head) {
    head.insert(head.end(), graph.begin(), graph.end());
    return head;
  };
  abg::test::write_text(dir / "a.toml", fmt::format(dataset_config, "a"));
  abg::test::write_text(dir / "b.toml", fmt::format(dataset_config, "b"));
  auto tsv = abg::test::run_abg(args({"generate", "g.tsv"}), dir.path());
  REQUIRE(tsv.exit_code == 0);
  auto imported = abg::test::run_abg({"import", "a.toml", "g.tsv", "--lhs-col", "0", "--rel-col", "1", "--rhs-col",
                                      "2"},
                                     dir.path());
  INFO(imported.err);
  REQUIRE(imported.exit_code == 0);
  auto direct = abg::test::run_abg(args({"generate", "--direct", "b.toml"}), dir.path());
  INFO(direct.err);
  REQUIRE(direct.exit_code == 0);
  CHECK(direct.err.find("wrote 20000 edges") != std::string::npos);

  auto a = edges_by_name(dir.path(), "a"), b = edges_by_name(dir.path(), "b");
  CHECK(a.size() == 20000);
  CHECK(a == b);
  auto meta = abg::storage::read_entity_meta(dir / "data/b");
  REQUIRE(meta.has_value());
  CHECK(meta->types[0].counts == std::vector<std::int64_t>{1500, 1500}); // every id, contiguous halves

  auto trained = abg::test::run_abg({"train", "b.toml"}, dir.path());
  INFO(trained.err);
  CHECK(trained.exit_code == 0);

  // An entity path already imported is never overwritten; a config that does not fit is named.
  auto again = abg::test::run_abg(args({"generate", "--direct", "b.toml"}), dir.path());
  CHECK(again.exit_code == 1);
  CHECK(again.err.find("entity path data/b is already imported; generate into a new entity_path") !=
        std::string::npos);
  auto fixed = abg::test::run_abg(args({"generate", "--direct", "b.toml", "-p", "dynamic_relations=false", "-p",
                                        "entity_path=data/c"}),
                                  dir.path());
  CHECK(fixed.exit_code == 1);
  CHECK(fixed.err.find("the config defines 1 relations but --relations is 4") != std::string::npos);
  auto both = abg::test::run_abg(args({"generate", "x.tsv", "--direct", "b.toml"}), dir.path());
  CHECK(both.exit_code == 1);
  CHECK(both.err.find("give either OUT.tsv or --direct CONFIG") != std::string::npos);
}
