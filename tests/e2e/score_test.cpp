// End to end through the CLI: `abg score` prints one line per edge, in order,
// with the score `abg neighbors` gives the same pair; true edges outscore
// corrupted ones; unknown names stop it with file and line (or are skipped
// with --skip-unknown). Kinship covers dynamic relations (both sides' scores);
// a generated graph covers per-relation operators, global embeddings, several
// partitions and a model without --rel-col.
#include <doctest/doctest.h>

#include <cmath>
#include <map>
#include <random>
#include <sstream>

#include <fmt/format.h>
#include <zlib.h>

#include "tests/e2e/cli.h"
#include "tests/e2e/kinship.h"
#include "tests/test_util.h"

namespace fs = std::filesystem;
using abg::test::run_abg;

namespace {

std::vector<std::string> split(const std::string& text, char delimiter) {
  std::vector<std::string> out;
  std::string field;
  std::istringstream in(text);
  while (std::getline(in, field, delimiter))
    out.push_back(field);
  return out;
}

std::vector<std::string> lines_of(const std::string& text) { return split(text, '\n'); }

struct scored_edge {
  std::string lhs, rel, rhs;
  double score = 0;
};

/// `abg score`'s stdout: four tab-separated fields a line, a finite score.
std::vector<scored_edge> parse_scores(const std::string& out) {
  std::vector<scored_edge> edges;
  for (auto& line : lines_of(out)) {
    auto f = split(line, '\t');
    REQUIRE_MESSAGE(f.size() == 4, line);
    edges.push_back({f[0], f[1], f[2], std::stod(f[3])});
    CHECK(std::isfinite(edges.back().score));
  }
  return edges;
}

/// `abg neighbors ... --k ALL`'s stdout: candidate name -> score.
std::map<std::string, double> neighbor_scores(const std::vector<std::string>& args, const fs::path& dir) {
  auto r = run_abg(args, dir);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  std::map<std::string, double> scores;
  for (auto& line : lines_of(r.out)) {
    auto f = split(line, '\t');
    REQUIRE(f.size() == 3);
    scores[f[1]] = std::stod(f[2]);
  }
  return scores;
}

void write_gzip(const fs::path& path, const std::string& text) {
  auto* f = gzopen(path.c_str(), "wb");
  REQUIRE(f != nullptr);
  REQUIRE(gzwrite(f, text.data(), static_cast<unsigned>(text.size())) == static_cast<int>(text.size()));
  REQUIRE(gzclose(f) == Z_OK);
}

// Both print 6 decimals of the model's float score, computed along different
// paths (pairwise vs one matrix product): the last digits may differ.
constexpr double tolerance = 1e-5;

} // namespace

TEST_CASE("abg score on Kinship: one line per edge, neighbors' scores on both sides, unknown names") {
  auto data = abg::test::shared_dataset("Kinship");
  REQUIRE_MESSAGE(fs::exists(data / "test.tsv"), "needs ../shared/data/Kinship");
  abg::test::scratch_dir dir;
  abg::test::write_text(dir / "kin.toml", abg::test::kinship_config);
  auto imported = run_abg({"import", "kin.toml", (data / "train.tsv").string(), (data / "valid.tsv").string(),
                           (data / "test.tsv").string(), "--lhs-col", "0", "--rel-col", "1", "--rhs-col", "2"},
                          dir.path());
  REQUIRE(imported.exit_code == 0);
  auto trained = run_abg({"train", "kin.toml", "-p", "edge_paths=data/kin/train"}, dir.path());
  INFO(trained.err);
  REQUIRE(trained.exit_code == 0);
  const std::vector<std::string> cols{"--lhs-col", "0", "--rel-col", "1", "--rhs-col", "2"};
  auto score = [&](std::vector<std::string> args, const fs::path& input = "/dev/null") {
    args.insert(args.begin(), {"score", "kin.toml"});
    args.insert(args.end(), cols.begin(), cols.end());
    return run_abg(args, dir.path(), input);
  };

  // Every test edge, in order, with its names as given.
  std::vector<std::vector<std::string>> test_edges;
  {
    std::ifstream in(data / "test.tsv");
    for (std::string line; std::getline(in, line);)
      test_edges.push_back(split(line, '\t'));
  }
  REQUIRE(test_edges.size() == 1069);
  auto scored = score({(data / "test.tsv").string()});
  INFO(scored.err);
  REQUIRE(scored.exit_code == 0);
  auto edges = parse_scores(scored.out);
  REQUIRE(edges.size() == test_edges.size());
  for (std::size_t i = 0; i < edges.size(); ++i) {
    CHECK(edges[i].lhs == test_edges[i][0]);
    CHECK(edges[i].rel == test_edges[i][1]);
    CHECK(edges[i].rhs == test_edges[i][2]);
  }
  CHECK(scored.err.find("scored 1069 edge(s)") != std::string::npos);

  // The score of (Person0, Term7, X) for every X equals what neighbors lists
  // for X as Person0's partner; the file comes gzip-compressed on stdin.
  auto as_head = neighbor_scores({"neighbors", "kin.toml", "Person0", "--relation", "Term7", "--k", "1000"},
                                 dir.path());
  REQUIRE(as_head.size() == 104);
  std::string pairs, reversed;
  for (auto& [name, s] : as_head) {
    pairs += "Person0\tTerm7\t" + name + "\n";
    reversed += name + "\tTerm7\tPerson0\n";
  }
  write_gzip(dir / "pairs.tsv.gz", pairs);
  auto from_stdin = score({"-"}, dir / "pairs.tsv.gz");
  INFO(from_stdin.err);
  REQUIRE(from_stdin.exit_code == 0);
  auto head_edges = parse_scores(from_stdin.out);
  REQUIRE(head_edges.size() == 104);
  for (auto& e : head_edges)
    CHECK(std::abs(e.score - as_head.at(e.rhs)) <= tolerance);

  // --side lhs: (X, Term7, Person0) as neighbors --side lhs ranks X; with
  // dynamic relations that score differs from the rhs side's.
  auto as_tail = neighbor_scores(
    {"neighbors", "kin.toml", "Person0", "--relation", "Term7", "--side", "lhs", "--k", "1000"}, dir.path());
  REQUIRE(as_tail.size() == 104);
  abg::test::write_text(dir / "reversed.tsv", reversed);
  auto lhs_side = score({"reversed.tsv", "--side", "lhs"});
  auto rhs_side = score({"reversed.tsv"});
  REQUIRE(lhs_side.exit_code == 0);
  REQUIRE(rhs_side.exit_code == 0);
  auto lhs_edges = parse_scores(lhs_side.out), rhs_edges = parse_scores(rhs_side.out);
  REQUIRE(lhs_edges.size() == 104);
  REQUIRE(rhs_edges.size() == 104);
  std::size_t sides_differ = 0;
  for (std::size_t i = 0; i < lhs_edges.size(); ++i) {
    CHECK(std::abs(lhs_edges[i].score - as_tail.at(lhs_edges[i].lhs)) <= tolerance);
    sides_differ += std::abs(lhs_edges[i].score - rhs_edges[i].score) > 1e-3;
  }
  CHECK(sides_differ > 50);

  // True test edges outscore the same edges with a random tail (random
  // scores would win half the time; measured: means 5.3 vs 0.3, 90% wins).
  std::vector<std::string> names;
  for (auto& [name, s] : as_head)
    names.push_back(name);
  std::mt19937 rng(11);
  std::uniform_int_distribution<std::size_t> pick(0, names.size() - 1);
  std::string corrupted;
  for (auto& e : test_edges)
    corrupted += e[0] + "\t" + e[1] + "\t" + names[pick(rng)] + "\n";
  abg::test::write_text(dir / "corrupted.tsv", corrupted);
  auto fake = score({"corrupted.tsv"});
  REQUIRE(fake.exit_code == 0);
  auto fake_edges = parse_scores(fake.out);
  REQUIRE(fake_edges.size() == edges.size());
  double true_sum = 0, fake_sum = 0;
  std::size_t wins = 0;
  for (std::size_t i = 0; i < edges.size(); ++i) {
    true_sum += edges[i].score;
    fake_sum += fake_edges[i].score;
    wins += edges[i].score > fake_edges[i].score;
  }
  auto n = static_cast<double>(edges.size());
  CHECK(true_sum / n > fake_sum / n + 2.0);
  CHECK(static_cast<double>(wins) / n > 0.75);

  // An unknown entity stops it at its line (blank lines count as lines);
  // the lines before it are printed.
  abg::test::write_text(dir / "bad.tsv", "Person1\tTerm7\tPerson2\n\nPerson3\tTerm7\tPerson4\n"
                                         "Person1\tTerm7\tNobody\nPerson5\tTerm7\tPerson6\n");
  auto bad = score({"bad.tsv"});
  CHECK(bad.exit_code == 1);
  CHECK(bad.err.find("bad.tsv:4: no entity named 'Nobody'") != std::string::npos);
  CHECK(lines_of(bad.out).size() == 2);
  auto skipping = score({"bad.tsv", "--skip-unknown"});
  INFO(skipping.err);
  CHECK(skipping.exit_code == 0);
  auto kept = parse_scores(skipping.out);
  REQUIRE(kept.size() == 3);
  CHECK(kept[2].lhs == "Person5");
  CHECK(skipping.err.find("bad.tsv:4: no entity named 'Nobody'") != std::string::npos);
  CHECK(skipping.err.find("skipped 1 line(s) with unknown names") != std::string::npos);

  abg::test::write_text(dir / "bad_rel.tsv", "Person1\tTermX\tPerson2\n");
  auto bad_rel = score({"bad_rel.tsv"});
  CHECK(bad_rel.exit_code == 1);
  CHECK(bad_rel.err.find("bad_rel.tsv:1: no relation named 'TermX'") != std::string::npos);
  abg::test::write_text(dir / "short.tsv", "Person1\tTerm7\n");
  auto short_line = score({"short.tsv"});
  CHECK(short_line.exit_code == 1);
  CHECK(short_line.err.find("short.tsv:1: 2 column(s), need at least 3") != std::string::npos);
  // 25 relations: which one a line means must come from a column.
  auto no_rel = run_abg({"score", "kin.toml", (data / "test.tsv").string(), "--lhs-col", "0", "--rhs-col", "2"},
                        dir.path());
  CHECK(no_rel.exit_code == 1);
  CHECK(no_rel.err.find("no --rel-col was given") != std::string::npos);
  CHECK(no_rel.out.empty());
}

TEST_CASE("abg score without dynamic relations: per-relation operators, partitions, columns, no --rel-col") {
  abg::test::scratch_dir dir;
  // 300 nodes, two relations; every node appears. Columns: rel,rhs,lhs.
  std::mt19937 rng(5);
  std::uniform_int_distribution<int> node(0, 299);
  std::string edges_csv, pairs_tsv;
  for (int i = 0; i < 3000; ++i) {
    auto lhs = fmt::format("n{}", i % 300), rhs = fmt::format("n{}", node(rng));
    edges_csv += fmt::format("{},{},{}\n", i % 2 ? "likes" : "knows", rhs, lhs);
    pairs_tsv += fmt::format("{}\t{}\n", lhs, rhs);
  }
  abg::test::write_text(dir / "edges.csv", edges_csv);
  abg::test::write_text(dir / "pairs.tsv", pairs_tsv);
  const std::string relations = R"(
[entities.node]
num_partitions = 3
[[relations]]
name = "likes"
lhs = "node"
rhs = "node"
operator = "translation"
)";
  abg::test::write_text(dir / "two.toml", R"(entity_path = "data/two"
edge_paths = ["data/two/train"]
checkpoint_path = "model/two"
dimension = 16
num_epochs = 3
workers = 1
)" + relations + R"([[relations]]
name = "knows"
lhs = "node"
rhs = "node"
operator = "diagonal"
)");
  abg::test::write_text(dir / "one.toml", R"(entity_path = "data/one"
edge_paths = ["data/one/train"]
checkpoint_path = "model/one"
dimension = 16
num_epochs = 3
workers = 1
)" + relations);
  const std::vector<std::string> csv_cols{"--lhs-col", "2", "--rel-col", "0", "--rhs-col", "1", "--delimiter", ","};
  auto import_args = std::vector<std::string>{"import", "two.toml", "edges.csv"};
  import_args.insert(import_args.end(), csv_cols.begin(), csv_cols.end());
  REQUIRE(run_abg(import_args, dir.path()).exit_code == 0);
  REQUIRE(run_abg({"train", "two.toml"}, dir.path()).exit_code == 0);
  REQUIRE(run_abg({"import", "one.toml", "pairs.tsv", "--lhs-col", "0", "--rhs-col", "1"}, dir.path()).exit_code == 0);
  REQUIRE(run_abg({"train", "one.toml"}, dir.path()).exit_code == 0);

  // Every pair (n7, R, X) for both relations, interleaved so each batch
  // mixes them; printed in lhs, rel, rhs order whatever the columns.
  auto likes = neighbor_scores({"neighbors", "two.toml", "n7", "--relation", "likes", "--k", "1000"}, dir.path());
  auto knows = neighbor_scores({"neighbors", "two.toml", "n7", "--relation", "knows", "--k", "1000"}, dir.path());
  REQUIRE(likes.size() == 300);
  REQUIRE(knows.size() == 300);
  std::string mixed;
  for (auto& [name, s] : likes)
    mixed += "likes," + name + ",n7\nknows," + name + ",n7\n";
  abg::test::write_text(dir / "mixed.csv", mixed);
  auto score_args = std::vector<std::string>{"score", "two.toml", "mixed.csv"};
  score_args.insert(score_args.end(), csv_cols.begin(), csv_cols.end());
  auto scored = run_abg(score_args, dir.path());
  INFO(scored.err);
  REQUIRE(scored.exit_code == 0);
  auto edges = parse_scores(scored.out);
  REQUIRE(edges.size() == 600);
  std::size_t relations_differ = 0;
  for (std::size_t i = 0; i < edges.size(); ++i) {
    auto& e = edges[i];
    CHECK(e.lhs == "n7");
    CHECK(e.rel == (i % 2 ? "knows" : "likes"));
    CHECK(std::abs(e.score - (e.rel == "likes" ? likes : knows).at(e.rhs)) <= tolerance);
    relations_differ += i % 2 && std::abs(e.score - edges[i - 1].score) > 1e-4;
  }
  CHECK(relations_differ > 100); // the operators were applied per relation

  // One relation: no --rel-col needed, its name is printed.
  auto one = neighbor_scores({"neighbors", "one.toml", "n7", "--relation", "likes", "--k", "1000"}, dir.path());
  auto single = run_abg({"score", "one.toml", "pairs.tsv", "--lhs-col", "0", "--rhs-col", "1"}, dir.path());
  INFO(single.err);
  REQUIRE(single.exit_code == 0);
  auto single_edges = parse_scores(single.out);
  REQUIRE(single_edges.size() == 3000);
  std::size_t compared = 0;
  for (auto& e : single_edges) {
    CHECK(e.rel == "likes");
    if (e.lhs == "n7") {
      CHECK(std::abs(e.score - one.at(e.rhs)) <= tolerance);
      ++compared;
    }
  }
  CHECK(compared == 10);
}
