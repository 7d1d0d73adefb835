// End to end through the CLI on Kinship: init_path after `abg import` extended
// the entity set and the (dynamic) relation types. A model trained on the
// edges among 70 of the 104 people, without 3 of the 25 relation types, is
// the init_path of a run on every edge: the 70 start with their trained
// embeddings and the 22 relation types with their trained parameters; the 34
// new people get a fresh N(0, 1) * init_scale row, the 3 new relation types
// the operator's identity; and the run trains to a good model. Two entity
// partitions, so that old and new rows share partitions.
#include <doctest/doctest.h>

#include <cmath>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>

#include "abg/storage/entity_store.h"
#include "tests/e2e/checkpoints.h"
#include "tests/e2e/cli.h"
#include "tests/e2e/kinship.h"
#include "tests/test_util.h"

namespace fs = std::filesystem;
using abg::test::run_abg;

namespace {

/// `abg export --format tsv`'s entities file: name -> the rest of its line (the values as printed).
std::map<std::string, std::string> exported(const fs::path& file) {
  std::map<std::string, std::string> rows;
  std::ifstream in(file);
  for (std::string line; std::getline(in, line);) {
    auto tab = line.find('\t');
    REQUIRE(tab != std::string::npos);
    CHECK(rows.emplace(line.substr(0, tab), line.substr(tab + 1)).second);
  }
  return rows;
}

/// `abg export`'s relation types file: "name\tside\toperator\tparam" -> the values (after the size).
std::map<std::string, std::string> exported_relations(const fs::path& file) {
  std::map<std::string, std::string> rows;
  std::ifstream in(file);
  for (std::string line; std::getline(in, line);) {
    std::size_t tab = 0;
    for (int i = 0; i < 4 && tab != std::string::npos; ++i)
      tab = line.find('\t', tab + (i > 0));
    REQUIRE(tab != std::string::npos);
    auto key = line.substr(0, tab);
    auto values = line.substr(line.find('\t', tab + 1) + 1); // skip the size column
    CHECK(rows.emplace(key, values).second);
  }
  return rows;
}

double norm(const std::string& values) {
  std::istringstream in(values);
  double sum = 0, v = 0;
  int n = 0;
  while (in >> v) {
    sum += v * v;
    ++n;
  }
  CHECK(n == 64);
  return std::sqrt(sum);
}

std::int64_t entity_count(const fs::path& entity_path) {
  auto meta = abg::storage::read_entity_meta(entity_path);
  REQUIRE(meta.has_value());
  REQUIRE(meta->type("all") != nullptr);
  std::int64_t n = 0;
  for (auto c : meta->type("all")->counts)
    n += c;
  return n;
}

} // namespace

TEST_CASE("abg train with init_path after abg import extended the entity set") {
  auto data = abg::test::kinship_data();
  abg::test::scratch_dir dir;
  std::string config = abg::test::kinship_config;
  auto parts = config.find("num_partitions = 1");
  REQUIRE(parts != std::string::npos);
  config.replace(parts, std::string("num_partitions = 1").size(), "num_partitions = 2");
  abg::test::write_text(dir / "kin.toml", config);

  // The train edges among Person0..Person69, but none of the 3 rarest relation types.
  const std::set<std::string> new_relations{"Term19", "Term24", "Term25"};
  std::set<std::string> old_people;
  {
    std::ifstream in(data / "train.tsv");
    std::ofstream out(dir / "train_a.tsv");
    auto is_old = [](const std::string& name) { return name.starts_with("Person") && std::stoi(name.substr(6)) < 70; };
    for (std::string line; std::getline(in, line);) {
      auto t1 = line.find('\t'), t2 = line.rfind('\t');
      auto lhs = line.substr(0, t1), rhs = line.substr(t2 + 1), rel = line.substr(t1 + 1, t2 - t1 - 1);
      if (is_old(lhs) && is_old(rhs) && !new_relations.contains(rel)) {
        out << line << '\n';
        old_people.insert(lhs);
        old_people.insert(rhs);
      }
    }
  }
  REQUIRE(old_people.size() == 70);
  auto import_a = run_abg({"import", "kin.toml", "-p", "edge_paths=data/kin/train_a", "train_a.tsv", "--lhs-col", "0",
                           "--rel-col", "1", "--rhs-col", "2"},
                          dir.path());
  INFO(import_a.err);
  REQUIRE(import_a.exit_code == 0);
  CHECK(import_a.err.find("70 entities (70 new), 22 relation type(s)") != std::string::npos);
  CHECK(entity_count(dir / "data/kin") == 70);

  auto train_a = run_abg({"train", "kin.toml", "-p", "edge_paths=data/kin/train_a", "-p", "checkpoint_path=model/a"},
                         dir.path());
  INFO(train_a.err);
  REQUIRE(train_a.exit_code == 0);
  REQUIRE(abg::test::newest_version(dir / "model/a") == 8);
  auto export_a = run_abg({"export", "kin.toml", "-p", "edge_paths=data/kin/train_a", "-p", "checkpoint_path=model/a",
                           "--entities-output", "a.tsv", "--relation-types-output", "a_rel.tsv"},
                          dir.path());
  INFO(export_a.err);
  REQUIRE(export_a.exit_code == 0);
  auto a = exported(dir / "a.tsv");
  REQUIRE(a.size() == 70);
  for (auto& name : old_people)
    CHECK(a.contains(name));

  // Every split, into the same entity path: 34 new people, ids of the 70 kept.
  auto import_all = run_abg({"import", "kin.toml", (data / "train.tsv").string(), (data / "valid.tsv").string(),
                             (data / "test.tsv").string(), "--lhs-col", "0", "--rel-col", "1", "--rhs-col", "2"},
                            dir.path());
  INFO(import_all.err);
  REQUIRE(import_all.exit_code == 0);
  CHECK(import_all.err.find("104 entities (34 new), 25 relation type(s)") != std::string::npos);
  CHECK(entity_count(dir / "data/kin") == 104);

  // One epoch with lr = 0 commits the starting point unchanged.
  auto start = run_abg({"train", "kin.toml", "-p", "edge_paths=data/kin/train", "-p", "checkpoint_path=model/b", "-p",
                        "init_path=model/a", "-p", "lr=0", "-p", "num_epochs=1"},
                       dir.path());
  INFO(start.err);
  REQUIRE(start.exit_code == 0);
  CHECK(start.err.find("starting from init_path model/a (version 8)") != std::string::npos);
  CHECK(start.err.find("3 relation type(s) added since init_path start with fresh parameters") != std::string::npos);
  REQUIRE(abg::test::newest_version(dir / "model/b") == 1);
  CHECK(abg::test::check_loadable(dir / "model/b", dir / "data/kin") == 1);
  auto export_b = run_abg({"export", "kin.toml", "-p", "checkpoint_path=model/b", "--entities-output", "b.tsv",
                           "--relation-types-output", "b_rel.tsv"},
                          dir.path());
  INFO(export_b.err);
  REQUIRE(export_b.exit_code == 0);
  auto b = exported(dir / "b.tsv");
  REQUIRE(b.size() == 104);
  double old_min = 1e9, new_min = 1e9, new_max = 0;
  std::set<std::string> new_rows;
  for (auto& [name, values] : b) {
    if (old_people.contains(name)) {
      CHECK_MESSAGE(values == a.at(name), name); // the trained embedding, bit for bit
      old_min = std::min(old_min, norm(values));
    } else {
      auto n = norm(values);
      new_min = std::min(new_min, n);
      new_max = std::max(new_max, n);
      new_rows.insert(values);
    }
  }
  // Fresh rows: N(0, 1) * 0.001 in 64 dimensions has a norm near 0.008
  // (measured 0.0063 to 0.0097); the trained ones are far larger (measured >= 2.8).
  INFO("old min norm ", old_min, ", new norms ", new_min, " to ", new_max);
  CHECK(new_rows.size() == 34);
  CHECK(new_min > 0.002);
  CHECK(new_max < 0.02);
  CHECK(old_min > 0.5);
  // The relation parameters come from init_path too; the new types start at
  // complex_diagonal's identity (real part 1, imaginary part 0).
  auto a_rel = exported_relations(dir / "a_rel.tsv"), b_rel = exported_relations(dir / "b_rel.tsv");
  CHECK(a_rel.size() == 22 * 4); // (lhs, rhs) x (real, imag) per relation type
  REQUIRE(b_rel.size() == 25 * 4);
  std::size_t fresh = 0;
  for (auto& [key, values] : b_rel) {
    if (!new_relations.contains(key.substr(0, key.find('\t')))) {
      CHECK_MESSAGE(values == a_rel.at(key), key);
      continue;
    }
    ++fresh;
    const bool real = key.ends_with("\treal");
    std::istringstream in(values);
    int n = 0;
    for (double v = 0; in >> v; ++n)
      CHECK_MESSAGE(v == (real ? 1.0 : 0.0), key);
    CHECK(n == 32);
  }
  CHECK(fresh == 3 * 4);
  // init_path is only read.
  CHECK(abg::test::newest_version(dir / "model/a") == 8);

  // The run goes on: resumed from its own checkpoint (not init_path again), to a good model.
  auto rest = run_abg({"train", "kin.toml", "-p", "edge_paths=data/kin/train", "-p", "checkpoint_path=model/b", "-p",
                       "init_path=model/a", "-p", "num_epochs=8"},
                      dir.path());
  INFO(rest.err);
  REQUIRE(rest.exit_code == 0);
  CHECK(rest.err.find("resuming from checkpoint version 1") != std::string::npos);
  CHECK(rest.err.find("starting from init_path") == std::string::npos);
  CHECK(abg::test::newest_version(dir / "model/b") == 8);
  abg::test::check_only_committed(dir / "model/b");
  CHECK(abg::test::check_loadable(dir / "model/b", dir / "data/kin") == 8);
  CHECK(abg::test::kinship_filtered_mrr(dir.path(), {"-p", "checkpoint_path=model/b"}) > 0.5);
}
