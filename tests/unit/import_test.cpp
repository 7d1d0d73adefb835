// The importer: names -> ids -> buckets -> names, partitions, weights,
// malformed lines, gzip, dictionary extension, idempotent re-import, locking.
#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include <zlib.h>

#include "abg/import.h"
#include "abg/storage/bucket_file.h"
#include "abg/storage/edge_manifest.h"
#include "abg/storage/entity_store.h"
#include "tests/test_util.h"

namespace fs = std::filesystem;
using namespace abg;

namespace {

config make_config(const abg::test::scratch_dir& dir, std::int64_t partitions, bool dynamic,
                   std::vector<std::string> relations = {"r"}, std::size_t edge_paths = 1) {
  config c;
  c.entities.push_back({"node", {partitions, false, std::nullopt}});
  for (auto& r : relations)
    c.relations.push_back({r, "node", "node", 1.0, "none", false});
  c.dimension = 10;
  c.dynamic_relations = dynamic;
  c.entity_path = (dir / "entities").string();
  for (std::size_t i = 0; i < edge_paths; ++i)
    c.edge_paths.push_back((dir / ("edges" + std::to_string(i))).string());
  c.checkpoint_path = (dir / "model").string();
  return c;
}

using triple = std::tuple<std::string, std::string, std::string, float>;

// Every edge of an edge path, back as names; checks each edge sits in the
// bucket of its entities' partitions.
std::multiset<triple> read_back(const config& c, std::size_t edge_path = 0) {
  auto meta = storage::read_entity_meta(c.entity_path);
  REQUIRE(meta);
  auto manifest = storage::read_edge_manifest(c.edge_paths[edge_path]);
  REQUIRE(manifest);
  CHECK(manifest->id == meta->id);
  auto* type = meta->type("node");
  REQUIRE(type);
  std::vector<std::vector<std::string>> names;
  for (std::int64_t p = 0; p < type->num_partitions(); ++p) {
    auto n = storage::read_entity_names(c.entity_path, *meta, "node", p);
    REQUIRE(n);
    names.push_back(*n);
  }
  std::multiset<triple> out;
  for (auto& b : manifest->buckets) {
    auto reader = storage::bucket_reader::open(fs::path(c.edge_paths[edge_path]) / b.file, &meta->id);
    REQUIRE(reader);
    CHECK(reader->size() == b.edges);
    CHECK(reader->checksum() == b.checksum);
    for (std::uint64_t i = 0; i < reader->size(); ++i) {
      REQUIRE(reader->lhs(i) < names[static_cast<std::size_t>(b.lhs)].size());
      REQUIRE(reader->rhs(i) < names[static_cast<std::size_t>(b.rhs)].size());
      REQUIRE(reader->rel(i) < meta->relation_names.size());
      out.emplace(names[static_cast<std::size_t>(b.lhs)][reader->lhs(i)], meta->relation_names[reader->rel(i)],
                  names[static_cast<std::size_t>(b.rhs)][reader->rhs(i)], reader->weight(i));
    }
  }
  return out;
}

std::string sample_edges(int n, int entities, int relations, int salt = 0) {
  std::string text;
  std::uint64_t x = 12345 + static_cast<std::uint64_t>(salt);
  auto next = [&] {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    return static_cast<int>((x >> 33) % 1000003);
  };
  for (int i = 0; i < n; ++i)
    text += fmt::format("e{}\tr{}\te{}\n", next() % entities, next() % relations, next() % entities);
  return text;
}

std::multiset<triple> parse_edges(std::string_view text) {
  std::multiset<triple> out;
  while (!text.empty()) {
    auto nl = text.find('\n');
    auto line = text.substr(0, nl);
    text = nl == std::string_view::npos ? "" : text.substr(nl + 1);
    auto a = line.find('\t'), b = line.find('\t', a + 1);
    out.emplace(std::string(line.substr(0, a)), std::string(line.substr(a + 1, b - a - 1)),
                std::string(line.substr(b + 1)), 1.0f);
  }
  return out;
}

import_options tsv_options(std::vector<fs::path> inputs) {
  import_options o;
  o.inputs = std::move(inputs);
  o.lhs_col = 0;
  o.rel_col = 1;
  o.rhs_col = 2;
  return o;
}

} // namespace

TEST_CASE("import round trip: names -> ids -> buckets -> names, with partitions") {
  abg::test::scratch_dir dir;
  auto text = sample_edges(2000, 300, 5);
  abg::test::write_text(dir / "in.tsv", text);
  auto c = make_config(dir, 3, true, {"any"});
  auto report = run_import(c, tsv_options({dir / "in.tsv"}));
  REQUIRE_MESSAGE(report, (report ? "" : report.error().message));
  CHECK(report->edges == 2000);
  CHECK(report->malformed == 0);
  CHECK(report->relations == 5);
  CHECK(read_back(c) == parse_edges(text));

  // PBG's assignment: shuffled names cut into contiguous slices, so sizes differ by at most one.
  auto meta = storage::read_entity_meta(c.entity_path);
  REQUIRE(meta);
  auto counts = meta->type("node")->counts;
  CHECK(counts.size() == 3);
  CHECK(*std::max_element(counts.begin(), counts.end()) - *std::min_element(counts.begin(), counts.end()) <= 1);
  CHECK(meta->type("node")->total() == static_cast<std::int64_t>(report->total_entities));
  auto manifest = storage::read_edge_manifest(c.edge_paths[0]);
  REQUIRE(manifest);
  CHECK(manifest->lhs_partitions == 3);
  CHECK(manifest->buckets.size() == 9);
}

namespace {

// Largest bucket over the mean bucket of an edge path.
double bucket_skew(const config& c) {
  auto manifest = storage::read_edge_manifest(c.edge_paths[0]);
  REQUIRE(manifest);
  std::uint64_t largest = 0;
  for (auto& b : manifest->buckets) largest = std::max(largest, b.edges);
  const auto buckets = static_cast<double>(manifest->lhs_partitions * manifest->rhs_partitions);
  return static_cast<double>(largest) / (static_cast<double>(manifest->total_edges()) / buckets);
}

} // namespace

TEST_CASE("partition_balance = edges: PBG's entity counts, and buckets of about equal edge counts") {
  // Skewed: 16 hubs hold about half of all edge endpoints, the rest spread over 2000 entities.
  std::string text;
  std::uint64_t x = 99;
  auto next = [&](std::uint64_t n) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    return (x >> 33) % n;
  };
  auto endpoint = [&] { return next(2) == 0 ? fmt::format("hub{}", next(16)) : fmt::format("e{}", next(2000)); };
  for (int i = 0; i < 100000; ++i) text += endpoint() + "\tr\t" + endpoint() + "\n";
  std::map<std::string, double> skew;
  for (const char* balance : {"entities", "edges"}) {
    abg::test::scratch_dir dir;
    abg::test::write_text(dir / "in.tsv", text);
    auto c = make_config(dir, 4, false);
    c.partition_balance = balance;
    auto report = run_import(c, tsv_options({dir / "in.tsv"}));
    REQUIRE_MESSAGE(report, (report ? "" : report.error().message));
    CHECK(read_back(c) == parse_edges(text)); // the same edges either way
    auto meta = storage::read_entity_meta(c.entity_path);
    REQUIRE(meta);
    auto counts = meta->type("node")->counts;
    CHECK(*std::max_element(counts.begin(), counts.end()) - *std::min_element(counts.begin(), counts.end()) <= 1);
    skew[balance] = bucket_skew(c);
  }
  INFO("largest bucket / mean: entities ", skew["entities"], ", edges ", skew["edges"]);
  // 4 hubs per partition (the 16 hubs dealt out evenly) keep the buckets
  // within 6% of the mean (6250 edges a bucket: chance alone moves one by 1.3%).
  // (PBG's split lands 16 hubs 4 per partition only by chance, about 1.5%
  // of imports: the dataset id seeds the shuffle.)
  CHECK(skew["edges"] < 1.06);
}

TEST_CASE("import keeps weights as float32 and reads gzip input") {
  abg::test::scratch_dir dir;
  auto gz = dir / "in.tsv.gz";
  {
    auto f = gzopen(gz.c_str(), "wb");
    REQUIRE(f);
    std::string text = "a\tb\t0.25\nb\tc\t1.5\nc\ta\t3e-2\n";
    gzwrite(f, text.data(), static_cast<unsigned>(text.size()));
    gzclose(f);
  }
  auto c = make_config(dir, 1, false);
  import_options o;
  o.inputs = {gz};
  o.lhs_col = 0;
  o.rhs_col = 1;
  o.weight_col = 2;
  auto report = run_import(c, o);
  REQUIRE_MESSAGE(report, (report ? "" : report.error().message));
  std::multiset<triple> want{{"a", "r", "b", 0.25f}, {"b", "r", "c", 1.5f}, {"c", "r", "a", 0.03f}};
  CHECK(read_back(c) == want);
  CHECK(storage::read_edge_manifest(c.edge_paths[0])->has_weights);
}

TEST_CASE("malformed lines are counted and reported with file and line; --strict stops") {
  abg::test::scratch_dir dir;
  abg::test::write_text(dir / "in.tsv", "a\tr\tb\n"
                                        "only-one-column\n"
                                        "a\t\tb\n"
                                        "\n"
                                        "c\tunknown\td\n"
                                        "c\tr\td\tignored-extra\n");
  auto c = make_config(dir, 1, false, {"r"});
  std::vector<std::string> warnings;
  import_callbacks cb;
  cb.warning = [&](std::string_view w) { warnings.emplace_back(w); };
  auto report = run_import(c, tsv_options({dir / "in.tsv"}), cb);
  REQUIRE_MESSAGE(report, (report ? "" : report.error().message));
  CHECK(report->edges == 2);
  CHECK(report->malformed == 3);
  auto all = fmt::format("{}", fmt::join(warnings, "\n"));
  CHECK(all.find("in.tsv:2:") != std::string::npos);
  CHECK(all.find("need at least 3") != std::string::npos);
  CHECK(all.find("in.tsv:3: skipped malformed line: empty field") != std::string::npos);
  CHECK(all.find("in.tsv:5:") != std::string::npos);
  CHECK(all.find("unknown relation 'unknown'") != std::string::npos);
  CHECK(all.find("3 malformed line(s)") != std::string::npos);

  abg::test::scratch_dir dir2;
  abg::test::write_text(dir2 / "in.tsv", "a\tr\tb\nbad\n");
  auto c2 = make_config(dir2, 1, false, {"r"});
  auto o = tsv_options({dir2 / "in.tsv"});
  o.strict = true;
  auto strict = run_import(c2, o);
  REQUIRE_FALSE(strict);
  CHECK(strict.error().message.find("in.tsv:2:") != std::string::npos);
  CHECK_FALSE(fs::exists(fs::path(c2.entity_path) / "entities.json")); // nothing written
}

TEST_CASE("a dynamic relation name that is not UTF-8 is a malformed line (entities.json keeps names as JSON)") {
  // Found by tests/fuzz/import_fuzz: before, writing entities.json ended the import in std::terminate.
  abg::test::scratch_dir dir;
  abg::test::write_text(dir / "in.tsv", "a\tr\tb\nc\tcaf\xe9\td\ne\t\xc3\xa9t\xc3\xa9\tf\n");
  auto c = make_config(dir, 1, true, {"any"});
  std::vector<std::string> warnings;
  import_callbacks cb;
  cb.warning = [&](std::string_view w) { warnings.emplace_back(w); };
  auto report = run_import(c, tsv_options({dir / "in.tsv"}), cb);
  REQUIRE_MESSAGE(report, (report ? "" : report.error().message));
  CHECK(report->edges == 2); // the valid UTF-8 name "été" is kept
  CHECK(report->malformed == 1);
  CHECK(fmt::format("{}", fmt::join(warnings, "\n")).find("in.tsv:2: skipped malformed line: relation name") !=
        std::string::npos);
  auto meta = storage::read_entity_meta(c.entity_path);
  REQUIRE(meta);
  CHECK(meta->relation_names == std::vector<std::string>{"r", "\xc3\xa9t\xc3\xa9"});
}

TEST_CASE("bad weights are malformed lines, not silently zero") {
  abg::test::scratch_dir dir;
  abg::test::write_text(dir / "in.tsv", "a\tb\t1.0\na\tc\tx\na\td\tnan\n");
  auto c = make_config(dir, 1, false);
  import_options o;
  o.inputs = {dir / "in.tsv"};
  o.rhs_col = 1;
  o.weight_col = 2;
  auto report = run_import(c, o);
  REQUIRE(report);
  CHECK(report->edges == 1);
  CHECK(report->malformed == 2);
}

TEST_CASE("extending an entity path keeps old ids and balances partitions") {
  abg::test::scratch_dir dir;
  abg::test::write_text(dir / "a.tsv", sample_edges(500, 100, 2, 1));
  abg::test::write_text(dir / "b.tsv", sample_edges(3000, 400, 3, 2));
  auto c = make_config(dir, 4, true, {"any"});
  REQUIRE(run_import(c, tsv_options({dir / "a.tsv"})));
  auto before = storage::read_entity_meta(c.entity_path);
  REQUIRE(before);
  std::vector<std::vector<std::string>> old_names;
  for (std::int64_t p = 0; p < 4; ++p)
    old_names.push_back(*storage::read_entity_names(c.entity_path, *before, "node", p));

  auto report = run_import(c, tsv_options({dir / "b.tsv"}));
  REQUIRE_MESSAGE(report, (report ? "" : report.error().message));
  CHECK(report->new_entities > 0);
  auto after = storage::read_entity_meta(c.entity_path);
  REQUIRE(after);
  CHECK(after->id == before->id);
  for (std::int64_t p = 0; p < 4; ++p) {
    auto names = *storage::read_entity_names(c.entity_path, *after, "node", p);
    auto& old = old_names[static_cast<std::size_t>(p)];
    REQUIRE(names.size() >= old.size());
    CHECK(std::equal(old.begin(), old.end(), names.begin())); // existing ids never move
  }
  auto counts = after->type("node")->counts;
  CHECK(*std::max_element(counts.begin(), counts.end()) - *std::min_element(counts.begin(), counts.end()) <= 1);
  // Dynamic relations: old ids kept, new ones appended.
  REQUIRE(after->relation_names.size() == 3);
  CHECK(std::equal(before->relation_names.begin(), before->relation_names.end(), after->relation_names.begin()));
  CHECK(read_back(c) == parse_edges(sample_edges(3000, 400, 3, 2)));
}

TEST_CASE("importing twice gives the same result") {
  abg::test::scratch_dir dir;
  abg::test::write_text(dir / "in.tsv", sample_edges(1000, 200, 3));
  abg::test::write_text(dir / "few.tsv", "e1\tr0\te2\n");
  auto c = make_config(dir, 2, true, {"any"});
  REQUIRE(run_import(c, tsv_options({dir / "in.tsv"})));
  auto first_meta = storage::read_file(fs::path(c.entity_path) / "entities.json");
  auto first = storage::read_file(fs::path(c.edge_paths[0]) / "manifest.json");
  REQUIRE(run_import(c, tsv_options({dir / "in.tsv"})));
  CHECK(*storage::read_file(fs::path(c.entity_path) / "entities.json") == *first_meta);
  CHECK(*storage::read_file(fs::path(c.edge_paths[0]) / "manifest.json") == *first);
  // A smaller re-import replaces the buckets: stale bucket files go away.
  REQUIRE(run_import(c, tsv_options({dir / "few.tsv"})));
  CHECK(read_back(c) == parse_edges("e1\tr0\te2"));
  std::size_t files = 0;
  for (auto& e : fs::directory_iterator(c.edge_paths[0]))
    files += e.path().extension() == ".abgb";
  CHECK(files == 1);
}

// The partitions of a fresh import with a config seed: the same for the same
// seed (in a new dataset, whose id differs), different for another seed.
TEST_CASE("with a seed, a fresh import puts the same names in the same partitions") {
  auto partitions = [](std::optional<std::int64_t> seed) {
    abg::test::scratch_dir dir;
    abg::test::write_text(dir / "in.tsv", sample_edges(1000, 200, 3));
    auto c = make_config(dir, 2, true, {"any"});
    c.seed = seed;
    REQUIRE(run_import(c, tsv_options({dir / "in.tsv"})));
    auto meta = storage::read_entity_meta(c.entity_path);
    REQUIRE(meta);
    std::vector<std::vector<std::string>> names;
    for (std::int64_t p = 0; p < 2; ++p)
      names.push_back(storage::read_entity_names(c.entity_path, *meta, "node", p).value());
    return std::pair{meta->id, names};
  };
  auto [id_a, a] = partitions(7);
  auto [id_b, b] = partitions(7);
  CHECK(id_a.bytes != id_b.bytes);
  CHECK(a == b);
  CHECK(partitions(8).second != a);
}

TEST_CASE("min counts drop rare entities and relations, and say so") {
  abg::test::scratch_dir dir;
  abg::test::write_text(dir / "in.tsv", "a\tr1\tb\na\tr1\tb\na\tr2\tc\n");
  auto c = make_config(dir, 1, true, {"any"});
  auto o = tsv_options({dir / "in.tsv"});
  o.entity_min_count = 2;
  auto report = run_import(c, o);
  REQUIRE(report);
  CHECK(report->edges == 2);
  CHECK(report->dropped_min_count == 1);
  CHECK(report->total_entities == 2);

  abg::test::scratch_dir dir2;
  abg::test::write_text(dir2 / "in.tsv", "a\tr1\tb\na\tr1\tb\na\tr2\tc\n");
  auto c2 = make_config(dir2, 1, true, {"any"});
  auto o2 = tsv_options({dir2 / "in.tsv"});
  o2.relation_type_min_count = 2;
  auto report2 = run_import(c2, o2);
  REQUIRE(report2);
  CHECK(report2->relations == 1);
  CHECK(report2->edges == 2);
}

TEST_CASE("one input per edge path, each into its own edge path") {
  abg::test::scratch_dir dir;
  abg::test::write_text(dir / "train.tsv", "a\tr\tb\nb\tr\tc\n");
  abg::test::write_text(dir / "test.tsv", "c\tr\ta\n");
  auto c = make_config(dir, 2, false, {"r"}, 2);
  auto wrong = run_import(c, tsv_options({dir / "train.tsv"}));
  REQUIRE_FALSE(wrong);
  CHECK(wrong.error().message.find("edge_paths") != std::string::npos);
  auto report = run_import(c, tsv_options({dir / "train.tsv", dir / "test.tsv"}));
  REQUIRE(report);
  CHECK(read_back(c, 0).size() == 2);
  CHECK(read_back(c, 1) == std::multiset<triple>{{"c", "r", "a", 1.0f}});
}

TEST_CASE("a concurrent import on the same entity path is refused") {
  abg::test::scratch_dir dir;
  abg::test::write_text(dir / "in.tsv", "a\tr\tb\n");
  auto c = make_config(dir, 1, false);
  auto held = storage::directory_lock::acquire(c.entity_path, "test holder");
  REQUIRE(held);
  auto report = run_import(c, tsv_options({dir / "in.tsv"}));
  REQUIRE_FALSE(report);
  CHECK(report.error().message.find("is in use by") != std::string::npos);
  CHECK(report.error().message.find("test holder") != std::string::npos);
}

TEST_CASE("changing the partition count of an imported type is refused") {
  abg::test::scratch_dir dir;
  abg::test::write_text(dir / "in.tsv", "a\tr\tb\n");
  auto c = make_config(dir, 2, false);
  REQUIRE(run_import(c, tsv_options({dir / "in.tsv"})));
  c.entities[0].second.num_partitions = 4;
  auto report = run_import(c, tsv_options({dir / "in.tsv"}));
  REQUIRE_FALSE(report);
  CHECK(report.error().message.find("partitions cannot change") != std::string::npos);
}
