// End to end through the CLI on Kinship from ../shared/data: import, train
// through the actor graph, filtered evaluation well above chance, resume after
// more epochs are asked for. Stops by signal and kills with resume are in
// train_signal_test.cpp and train_kill_resume_test.cpp.
#include <doctest/doctest.h>

#include <algorithm>

#include <nlohmann/json.hpp>

#include "abg/storage/checkpoint.h"
#include "abg/storage/entity_store.h"
#include "tests/e2e/cli.h"
#include "tests/e2e/kinship.h"
#include "tests/test_util.h"

using abg::test::kinship_filtered_mrr;

TEST_CASE("abg train + abg eval --filtered on Kinship; resume after more epochs") {
  abg::test::scratch_dir dir;
  abg::test::import_kinship(dir.path());

  // Train on the train split only; filtering uses all three edge paths.
  auto trained = abg::test::run_abg({"train", "kin.toml", "-p", "edge_paths=data/kin/train"}, dir.path());
  INFO(trained.err);
  REQUIRE(trained.exit_code == 0);
  CHECK(trained.err.find("trained 8 iteration(s)") != std::string::npos);
  CHECK(trained.err.find("seed 7") != std::string::npos);
  CHECK(abg::storage::committed_checkpoint_versions(dir / "model/kin").back() == 8);
  // Random ranking among 104 entities gives an MRR near 0.05.
  auto mrr = kinship_filtered_mrr(dir.path());
  CHECK(mrr > 0.5);

  auto sampled = abg::test::run_abg({"eval", "kin.toml", "--json", "--per-relation"}, dir.path());
  REQUIRE(sampled.exit_code == 0);
  auto doc = nlohmann::json::parse(sampled.out);
  // The test split holds 22 of the 25 relations; each is reported by name.
  CHECK(doc["per_relation"].size() == 22);
  CHECK(doc["per_relation"].contains("Term7"));

  // Inference: neighbours by cosine and best partners under a relation.
  auto near = abg::test::run_abg({"neighbors", "kin.toml", "Person0", "--k", "3"}, dir.path());
  INFO(near.err);
  REQUIRE(near.exit_code == 0);
  CHECK(std::count(near.out.begin(), near.out.end(), '\n') == 3);
  CHECK(near.out.find("Person0\t") == std::string::npos); // never its own neighbour
  auto partners = abg::test::run_abg({"neighbors", "kin.toml", "Person0", "--relation", "Term7", "--k", "5"},
                                     dir.path());
  REQUIRE(partners.exit_code == 0);
  CHECK(partners.out.rfind("1\tPerson", 0) == 0);
  auto unknown = abg::test::run_abg({"neighbors", "kin.toml", "Nobody"}, dir.path());
  CHECK(unknown.exit_code == 1);
  CHECK(unknown.err.find("no entity named 'Nobody'") != std::string::npos);

  // Two more epochs: the run resumes after the committed ones.
  auto more = abg::test::run_abg({"train", "kin.toml", "-p", "edge_paths=data/kin/train", "-p", "num_epochs=10"},
                                 dir.path());
  INFO(more.err);
  REQUIRE(more.exit_code == 0);
  CHECK(more.err.find("resumed at iteration 8") != std::string::npos);
  CHECK(abg::storage::committed_checkpoint_versions(dir / "model/kin").back() == 10);
}

// entity_optimizer = "adagrad" (kbc's and LibKGE's element-wise Adagrad):
// Kinship in two partitions, so the tables travel through the partition
// servers with their [rows, dim] optimizer state and the checkpoint keeps
// it; a run with PBG's row-wise Adagrad resumes from that checkpoint (its
// state averaged per row).
TEST_CASE("abg train with entity_optimizer = adagrad, resumed with row_adagrad") {
  abg::test::scratch_dir dir;
  std::string config = abg::test::kinship_config;
  config.replace(config.find("num_partitions = 1"), 18, "num_partitions = 2");
  abg::test::import_kinship(dir.path(), config);
  auto trained = abg::test::run_abg({"train", "kin.toml", "-p", "edge_paths=data/kin/train", "-p",
                                     "entity_optimizer=adagrad", "-p", "num_epochs=6"},
                                    dir.path());
  INFO(trained.err);
  REQUIRE(trained.exit_code == 0);
  auto meta = abg::storage::read_entity_meta(dir / "data/kin");
  REQUIRE(meta.has_value());
  auto reader = abg::storage::checkpoint_reader::open(dir / "model/kin", meta->id);
  REQUIRE(reader);
  for (std::int64_t part : {0, 1}) {
    const auto* table = reader->manifest().table("all", part);
    REQUIRE(table != nullptr);
    CHECK(table->state_width == 64);
    auto state = reader->optimizer("all", part);
    REQUIRE(state);
    CHECK(state->shape == std::vector<std::int64_t>{table->rows, 64});
    CHECK(*std::max_element(state->data.begin(), state->data.end()) > 0.0f);
  }
  CHECK(abg::test::kinship_filtered_mrr(dir.path()) > 0.4);

  auto more = abg::test::run_abg({"train", "kin.toml", "-p", "edge_paths=data/kin/train", "-p", "num_epochs=8"},
                                 dir.path());
  INFO(more.err);
  REQUIRE(more.exit_code == 0);
  CHECK(more.err.find("resumed at iteration 6") != std::string::npos);
  auto after = abg::storage::checkpoint_reader::open(dir / "model/kin", meta->id);
  REQUIRE(after);
  CHECK(after->manifest().table("all", 0)->state_width == 1);
  CHECK(abg::test::kinship_filtered_mrr(dir.path()) > 0.4);
}
