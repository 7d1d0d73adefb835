// End to end through the CLI: `abg average` after `abg train` on Kinship
// commits the mean of the last epochs as the newest version, which `abg eval`
// reads and a later `abg train` goes on from; too few kept versions are
// refused with the key to set, and nothing is written.
#include <doctest/doctest.h>

#include "abg/storage/checkpoint.h"
#include "tests/e2e/cli.h"
#include "tests/e2e/kinship.h"
#include "tests/test_util.h"

using abg::test::run_abg;

TEST_CASE("abg average on Kinship: the mean of the last epochs, evaluated and trained on") {
  abg::test::scratch_dir dir;
  abg::test::import_kinship(dir.path());
  const auto model = dir.path() / "model" / "kin";

  auto trained = run_abg({"train", "kin.toml", "-p", "edge_paths=data/kin/train", "-p", "num_epochs=6"}, dir.path());
  INFO(trained.err);
  REQUIRE(trained.exit_code == 0);
  // The default keeps 2 versions: averaging 4 is refused, naming the key.
  auto refused = run_abg({"average", "kin.toml", "--last", "4"}, dir.path());
  CHECK(refused.exit_code == 1);
  CHECK(refused.err.find("checkpoint_keep_versions >= 4") != std::string::npos);
  CHECK(abg::storage::committed_checkpoint_versions(model) == std::vector<std::int64_t>{5, 6});

  auto more = run_abg({"train", "kin.toml", "-p", "edge_paths=data/kin/train", "-p", "num_epochs=10", "-p",
                       "checkpoint_keep_versions=4"},
                      dir.path());
  INFO(more.err);
  REQUIRE(more.exit_code == 0);
  const double last_epoch = abg::test::kinship_filtered_mrr(dir.path());
  auto averaged = run_abg({"average", "kin.toml", "--last", "4"}, dir.path());
  INFO(averaged.err);
  REQUIRE(averaged.exit_code == 0);
  CHECK(averaged.err.find("committed version 11") != std::string::npos);
  CHECK(averaged.err.find("the mean of versions 7, 8, 9, 10") != std::string::npos);
  auto m = abg::storage::read_checkpoint_manifest(model / "v11");
  REQUIRE(m);
  CHECK(m->stats["averaged_versions"] == nlohmann::json{7, 8, 9, 10});
  CHECK(m->position.epoch == 9);
  // The mean is another model than the last epoch's, and a sound one.
  const double mean = abg::test::kinship_filtered_mrr(dir.path());
  CHECK(mean != last_epoch);
  CHECK(mean > 0.5);
  CHECK(run_abg({"average", "kin.toml", "--last", "2"}, dir.path()).err.find("already an average") !=
        std::string::npos);

  // Training on resumes from the mean: one more epoch, version 12.
  auto resumed = run_abg({"train", "kin.toml", "-p", "edge_paths=data/kin/train", "-p", "num_epochs=11", "-p",
                          "checkpoint_keep_versions=4"},
                         dir.path());
  INFO(resumed.err);
  REQUIRE(resumed.exit_code == 0);
  CHECK(resumed.err.find("resumed at iteration 10") != std::string::npos);
  auto newest = abg::storage::read_checkpoint_manifest(model / "v12");
  REQUIRE(newest);
  CHECK(newest->position.epoch == 10);
}
