// End to end through the CLI on Kinship from ../shared/data: import, train
// through the actor graph, filtered evaluation well above chance, resume after
// more epochs are asked for, and resume after a SIGKILL.
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <thread>

#include <nlohmann/json.hpp>
#include <sys/wait.h>
#include <unistd.h>

#include "abg/storage/checkpoint.h"
#include "tests/e2e/cli.h"
#include "tests/e2e/kinship.h"
#include "tests/test_util.h"

namespace fs = std::filesystem;

namespace {

using abg::test::kinship_config;

double filtered_mrr(const fs::path& dir) {
  auto r = abg::test::run_abg({"eval", "kin.toml", "--filtered", "--json"}, dir);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  auto doc = nlohmann::json::parse(r.out); // exactly one JSON object on stdout
  for (auto key : {"mrr", "mean_rank", "hits@1", "hits@10", "hits@50", "auc", "count"})
    CHECK(doc.contains(key));
  CHECK(doc["count"] == 1069);
  return doc["mrr"].get<double>();
}

} // namespace

TEST_CASE("abg train + abg eval --filtered on Kinship; resume after more epochs and after SIGKILL") {
  auto data = abg::test::shared_dataset("Kinship");
  REQUIRE_MESSAGE(fs::exists(data / "train.tsv"), "needs ../shared/data/Kinship");
  abg::test::scratch_dir dir;
  abg::test::write_text(dir / "kin.toml", kinship_config);
  auto imported = abg::test::run_abg({"import", "kin.toml", (data / "train.tsv").string(),
                                      (data / "valid.tsv").string(), (data / "test.tsv").string(), "--lhs-col", "0",
                                      "--rel-col", "1", "--rhs-col", "2"},
                                     dir.path());
  REQUIRE(imported.exit_code == 0);

  // Train on the train split only; filtering uses all three edge paths.
  auto trained = abg::test::run_abg({"train", "kin.toml", "-p", "edge_paths=data/kin/train"}, dir.path());
  INFO(trained.err);
  REQUIRE(trained.exit_code == 0);
  CHECK(trained.err.find("trained 8 iteration(s)") != std::string::npos);
  CHECK(trained.err.find("seed 7") != std::string::npos);
  CHECK(abg::storage::committed_checkpoint_versions(dir / "model/kin").back() == 8);
  // Random ranking among 104 entities gives an MRR near 0.05.
  auto mrr = filtered_mrr(dir.path());
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

  // SIGKILL in the middle of a longer run, then start it again.
  auto args = std::vector<std::string>{ABG_BINARY, "train", "kin.toml", "-p", "edge_paths=data/kin/train",
                                       "-p", "num_epochs=60"};
  pid_t pid = fork();
  if (pid == 0) {
    if (chdir(dir.path().c_str()) != 0)
      _exit(127);
    std::freopen("/dev/null", "w", stderr);
    std::vector<char*> argv;
    for (auto& a : args)
      argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (abg::storage::committed_checkpoint_versions(dir / "model/kin").back() < 13 &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ::kill(pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
  CHECK(WIFSIGNALED(status));
  auto killed_at = abg::storage::committed_checkpoint_versions(dir / "model/kin").back();
  CHECK(killed_at >= 13);
  CHECK(killed_at < 60);
  auto resumed = abg::test::run_abg({"train", "kin.toml", "-p", "edge_paths=data/kin/train", "-p", "num_epochs=60"},
                                    dir.path());
  INFO(resumed.err);
  REQUIRE(resumed.exit_code == 0);
  CHECK(resumed.err.find("resumed at iteration " + std::to_string(killed_at)) != std::string::npos);
  CHECK(abg::storage::committed_checkpoint_versions(dir / "model/kin").back() == 60);
  CHECK(filtered_mrr(dir.path()) > 0.5);
}
