// What each node of a cluster holds (runtime/train/node_memory.h), on a
// 2-partition graph in PBG's layout for 2 machines and with one dedicated
// partition server: partitions k mod servers, the largest bucket's tables and
// edges per trainer, the largest table on the coordinator.
#include <doctest/doctest.h>

#include <algorithm>

#include <fmt/format.h>

#include "abg/cluster.h"
#include "abg/config.h"
#include "abg/import.h"
#include "runtime/train/node_memory.h"
#include "tests/test_util.h"

using namespace abg;

TEST_CASE("node memory: partitions on their servers, the largest bucket on each trainer, a table on the coordinator") {
  test::scratch_dir dir;
  auto toml = fmt::format(R"(entity_path = "{0}/ent"
edge_paths = ["{0}/edges"]
checkpoint_path = "{0}/model"
dimension = 4
[entities.node]
num_partitions = 2
[[relations]]
name = "r"
lhs = "node"
rhs = "node"
)",
                          dir.path().string());
  auto c = parse_config(toml, "test.toml");
  REQUIRE(c);
  std::string text;
  for (int i = 0; i < 1000; ++i) text += fmt::format("n{}\tn{}\n", i % 200, (i * 7 + 3) % 200);
  test::write_text(dir / "edges.tsv", text);
  import_options o;
  o.inputs = {dir / "edges.tsv"};
  o.lhs_col = 0;
  o.rhs_col = 1;
  REQUIRE(run_import(c->value, o));
  auto p = train::make_plan(c->value);
  REQUIRE(p);
  // 200 entities in 2 partitions of 100; a table is 100 x (4 + 1) floats.
  CHECK(train::table_bytes(*p, {0, 0}) == 2000);
  std::uint64_t largest_bucket_edges = 0;
  for (auto& b : p->manifests[0].buckets) largest_bucket_edges = std::max(largest_bucket_edges, b.edges);
  const std::uint64_t trainer = 2 * 2000 + largest_bucket_edges * 3 * p->manifests[0].id_width;

  auto two = train::node_memory_needs(*p, pbg_layout(2, -1));
  REQUIRE(two.size() == 2);
  CHECK(two[0].partitions == 2000);  // partition 0 on rank 0's server, 1 on rank 1's
  CHECK(two[1].partitions == 2000);
  CHECK(two[0].trainer == trainer);
  CHECK(two[1].trainer == trainer);
  CHECK(two[0].parameters == 0);  // no unpartitioned table to share
  CHECK(two[0].checkpoint == 2000);
  CHECK(two[1].checkpoint == 0);
  CHECK(two[0].total() == 2000 + trainer + 2000);

  // One dedicated partition server holds both partitions; it trains nothing.
  auto dedicated = train::node_memory_needs(*p, pbg_layout(2, 1));
  REQUIRE(dedicated.size() == 3);
  CHECK(dedicated[2].partitions == 4000);
  CHECK(dedicated[2].trainer == 0);
  CHECK(dedicated[0].partitions == 0);
}
