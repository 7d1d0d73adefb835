// End to end through the CLI: FB15k-237 from ../shared/data imported into 4
// partitions; manifests count every input line and every edge sits, with the
// right ids, in the bucket of its entities' partitions.
#include <doctest/doctest.h>

#include <map>
#include <set>
#include <tuple>

#include "abg/storage/bucket_file.h"
#include "abg/storage/edge_manifest.h"
#include "abg/storage/entity_store.h"
#include "tests/e2e/cli.h"
#include "tests/test_util.h"

namespace fs = std::filesystem;
using namespace abg;

namespace {

std::vector<std::array<std::string, 3>> read_tsv(const fs::path& file) {
  std::ifstream in(file);
  std::vector<std::array<std::string, 3>> rows;
  std::string line;
  while (std::getline(in, line)) {
    std::string_view v = line;
    auto a = v.find('\t');
    REQUIRE(a != std::string_view::npos);
    auto b = v.find('\t', a + 1);
    REQUIRE(b != std::string_view::npos);
    rows.push_back({std::string(v.substr(0, a)), std::string(v.substr(a + 1, b - a - 1)),
                    std::string(v.substr(b + 1))});
  }
  return rows;
}

} // namespace

TEST_CASE("abg import: FB15k-237 into 4 partitions") {
  auto data = abg::test::shared_dataset("FB15k-237");
  REQUIRE_MESSAGE(fs::exists(data / "train.tsv"), "needs ../shared/data/FB15k-237");
  abg::test::scratch_dir dir;
  abg::test::write_text(dir / "fb.toml", R"(entity_path = "data/fb"
edge_paths = ["data/fb/train", "data/fb/valid", "data/fb/test"]
checkpoint_path = "model/fb"
dimension = 400
dynamic_relations = true
[entities.all]
num_partitions = 4
[[relations]]
name = "all_edges"
lhs = "all"
rhs = "all"
operator = "complex_diagonal"
)");
  auto r = abg::test::run_abg({"import", "fb.toml", (data / "train.tsv").string(), (data / "valid.tsv").string(),
                               (data / "test.tsv").string(), "--lhs-col", "0", "--rel-col", "1", "--rhs-col", "2"},
                              dir.path());
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(r.err.find("imported 310116 edges") != std::string::npos);

  auto meta = storage::read_entity_meta(dir / "data/fb");
  REQUIRE(meta);
  CHECK(meta->relation_names.size() == 237);
  CHECK(meta->type("all")->total() == 14541);
  std::map<std::string, std::pair<std::int64_t, std::uint64_t>> where; // name -> (partition, offset)
  for (std::int64_t p = 0; p < 4; ++p) {
    auto names = storage::read_entity_names(dir / "data/fb", *meta, "all", p);
    REQUIRE(names);
    for (std::uint64_t i = 0; i < names->size(); ++i)
      where[(*names)[i]] = {p, i};
  }
  std::map<std::string, std::uint64_t> relation_id;
  for (std::uint64_t i = 0; i < meta->relation_names.size(); ++i)
    relation_id[meta->relation_names[i]] = i;

  const std::map<std::string, std::uint64_t> expected_counts{{"train", 272115}, {"valid", 17535}, {"test", 20466}};
  for (auto& [split, count] : expected_counts) {
    auto rows = read_tsv(data / (split + ".tsv"));
    CHECK(rows.size() == count);
    auto manifest = storage::read_edge_manifest(dir / "data/fb" / split);
    REQUIRE(manifest);
    CHECK(manifest->total_edges() == count);
    CHECK(manifest->id == meta->id);
    // The buckets hold exactly the input's edges, each in (partition(lhs), partition(rhs)).
    using edge = std::tuple<std::int64_t, std::int64_t, std::uint64_t, std::uint64_t, std::uint64_t>;
    std::multiset<edge> want, got;
    for (auto& [h, rel, t] : rows) {
      auto [hp, ho] = where.at(h);
      auto [tp, to] = where.at(t);
      want.emplace(hp, tp, ho, relation_id.at(rel), to);
    }
    for (auto& b : manifest->buckets) {
      auto reader = storage::bucket_reader::open(dir / "data/fb" / split / b.file, &meta->id);
      REQUIRE(reader);
      for (std::uint64_t i = 0; i < reader->size(); ++i)
        got.emplace(b.lhs, b.rhs, reader->lhs(i), reader->rel(i), reader->rhs(i));
    }
    CHECK(got == want);
  }

  auto info = abg::test::run_abg({"info", "fb.toml", "--edges"}, dir.path());
  INFO(info.err);
  CHECK(info.exit_code == 0);
  CHECK(info.out.find("14541 entities in 4 partition(s)") != std::string::npos);
  CHECK(info.out.find("edge path data/fb/train: 272115 edges in 16 bucket(s)") != std::string::npos);
}
