// End to end through the CLI on Kinship: `abg train` killed with SIGKILL at
// random moments (mid-iteration, mid-checkpoint-write, wherever it falls) and
// started again each time ends with the model an uninterrupted run trains:
// bit for bit with one worker (a seeded run with workers = 1 is reproducible,
// and a checkpoint holds every bit of training state), and with HOGWILD
// workers the same filtered MRR within noise. After every kill the newest
// committed version is complete and readable; after the last resume no
// uncommitted version or temporary file is left. The same with a partition
// buffer, whose partitions live on disk between buckets.
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <optional>
#include <csignal>
#include <random>
#include <string>
#include <thread>

#include <sys/wait.h>

#include "tests/e2e/checkpoints.h"
#include "tests/e2e/cli.h"
#include "tests/e2e/kinship.h"
#include "tests/e2e/kinship_cluster.h"
#include "tests/test_util.h"

namespace fs = std::filesystem;
using namespace std::chrono_literals;

namespace {

std::vector<std::string> train_args(int epochs, const std::string& checkpoint_path, int workers) {
  return {"train", "kin.toml", "-p", "edge_paths=data/kin/train", "-p", "num_epochs=" + std::to_string(epochs),
          "-p", "checkpoint_path=" + checkpoint_path, "-p", "workers=" + std::to_string(workers)};
}

/// Runs `abg train ARGS` once per entry of `ranges`: waits until a version in
/// [lo, hi] (drawn at random) is committed, lets it run up to one more
/// iteration (its length measured on this run: the time between the first
/// two versions seen committed and the target, so neither start-up nor the
/// machine's speed moves the kill past the run's end) and SIGKILLs it, so
/// the kill lands anywhere in an iteration or its checkpoint write. Returns
/// the newest committed version after the last kill.
std::int64_t kill_at_random_moments(const fs::path& dir, const std::vector<std::string>& args,
                                    const fs::path& model, const std::vector<std::pair<int, int>>& ranges,
                                    std::mt19937& rng) {
  std::int64_t newest = 0;
  for (auto [lo, hi] : ranges) {
    auto target = std::uniform_int_distribution<int>(lo, hi)(rng);
    abg::test::abg_process run(args, dir, dir / "killed.err");
    REQUIRE(run.started());
    // The first version this run commits, and when it was seen.
    const auto before = abg::test::newest_version(model);
    std::optional<std::pair<std::int64_t, std::chrono::steady_clock::time_point>> first_seen;
    bool reached = run.wait_until(
      [&] {
        auto v = abg::test::newest_version(model);
        if (!first_seen && v > before) first_seen.emplace(v, std::chrono::steady_clock::now());
        return v >= target;
      },
      120s);
    REQUIRE(reached);
    const auto seen = abg::test::newest_version(model);
    auto iteration = std::chrono::duration_cast<std::chrono::milliseconds>(30ms);
    if (first_seen && seen > first_seen->first)
      iteration = std::chrono::duration_cast<std::chrono::milliseconds>(
        (std::chrono::steady_clock::now() - first_seen->second) / (seen - first_seen->first));
    auto extra = iteration * std::uniform_real_distribution<double>(0.0, 1.0)(rng);
    INFO("kill after version ", target, " + ", extra.count(), " ms (an iteration: ", iteration.count(), " ms)");
    std::this_thread::sleep_for(extra);
    run.signal(SIGKILL);
    auto status = run.wait_for(30s);
    REQUIRE(status);
    CHECK(WIFSIGNALED(*status)); // still running when killed
    newest = abg::test::newest_version(model);
    CHECK(newest >= target);
    // Whatever the kill interrupted, the newest committed version is whole.
    CHECK(abg::test::check_loadable(model, dir / "data/kin") == newest);
  }
  return newest;
}

/// Runs `abg train ARGS` to the end after the kills: it resumes at `killed_at`.
void resume(const fs::path& dir, const std::vector<std::string>& args, const fs::path& model, std::int64_t killed_at,
            int epochs) {
  auto resumed = abg::test::run_abg(args, dir);
  INFO(resumed.err);
  REQUIRE(resumed.exit_code == 0);
  CHECK(resumed.err.find("(resumed at iteration " + std::to_string(killed_at) + ")") != std::string::npos);
  CHECK(abg::test::newest_version(model) == epochs);
  abg::test::check_only_committed(model);
  CHECK(abg::test::check_loadable(model, dir / "data/kin") == epochs);
  // A kill between a commit and its training_stats.json line loses the line;
  // the file never holds a torn line.
  auto stats = abg::test::training_stats(model);
  REQUIRE_FALSE(stats.empty());
  CHECK(stats.size() <= static_cast<std::size_t>(epochs));
  CHECK(stats.back()["epoch"] == epochs - 1);
}

/// Every embedding, optimizer state and shared tensor of the two models' newest versions (both `epochs`) is identical.
void check_same_model(const fs::path& dir, const fs::path& ref_model, const fs::path& got_model, int epochs) {
  auto meta = abg::storage::read_entity_meta(dir / "data/kin");
  REQUIRE(meta.has_value());
  auto ref = abg::storage::checkpoint_reader::open(ref_model, meta->id);
  auto got = abg::storage::checkpoint_reader::open(got_model, meta->id);
  REQUIRE(ref.has_value());
  REQUIRE(got.has_value());
  CHECK(ref->version() == epochs);
  CHECK(got->version() == epochs);
  REQUIRE(ref->manifest().tables.size() == got->manifest().tables.size());
  for (auto& t : ref->manifest().tables) {
    INFO("table ", t.type, "/", t.partition);
    auto a = ref->embeddings(t.type, t.partition), b = got->embeddings(t.type, t.partition);
    REQUIRE(a.has_value());
    REQUIRE(b.has_value());
    CHECK(a->shape == b->shape);
    CHECK(a->data == b->data);
    auto sa = ref->optimizer(t.type, t.partition), sb = got->optimizer(t.type, t.partition);
    REQUIRE(sa.has_value());
    REQUIRE(sb.has_value());
    CHECK(sa->data == sb->data);
  }
  auto sa = ref->shared(), sb = got->shared();
  REQUIRE(sa.has_value());
  REQUIRE(sb.has_value());
  REQUIRE(sa->entries.size() == sb->entries.size());
  for (std::size_t i = 0; i < sa->entries.size(); ++i)
    CHECK(sa->entries[i].name == sb->entries[i].name);
  CHECK(sa->data == sb->data);
}

} // namespace

TEST_CASE("abg train killed (SIGKILL) at random moments and resumed: the uninterrupted run's model, bit for bit "
          "(workers = 1)") {
  auto seed = std::random_device{}();
  INFO("random kill moments, seed ", seed);
  std::mt19937 rng(seed);
  abg::test::scratch_dir dir;
  abg::test::import_kinship(dir.path()); // both runs share the import: the same entity ids
  constexpr int epochs = 20; // the last kill (after version 12-14, plus at most an iteration) leaves some to resume
  auto reference = abg::test::run_abg(train_args(epochs, "model/ref", 1), dir.path());
  INFO(reference.err);
  REQUIRE(reference.exit_code == 0);

  auto args = train_args(epochs, "model/killed", 1);
  auto killed_at = kill_at_random_moments(dir.path(), args, dir / "model/killed", {{2, 5}, {7, 10}, {12, 14}}, rng);
  CHECK(killed_at < epochs);
  resume(dir.path(), args, dir / "model/killed", killed_at, epochs);

  check_same_model(dir.path(), dir / "model/ref", dir / "model/killed", epochs);
}

TEST_CASE("abg train killed (SIGKILL) at random moments and resumed: filtered MRR within noise of an uninterrupted "
          "run (HOGWILD, workers = 2)") {
  auto seed = std::random_device{}();
  INFO("random kill moments, seed ", seed);
  std::mt19937 rng(seed);
  abg::test::scratch_dir dir;
  abg::test::import_kinship(dir.path());
  constexpr int epochs = 30;
  auto reference = abg::test::run_abg(train_args(epochs, "model/ref", 2), dir.path());
  INFO(reference.err);
  REQUIRE(reference.exit_code == 0);
  auto ref_mrr = abg::test::kinship_filtered_mrr(dir.path(), {"-p", "checkpoint_path=model/ref"});

  auto args = train_args(epochs, "model/killed", 2);
  auto killed_at = kill_at_random_moments(dir.path(), args, dir / "model/killed", {{3, 8}, {11, 16}, {21, 26}}, rng);
  resume(dir.path(), args, dir / "model/killed", killed_at, epochs);
  auto mrr = abg::test::kinship_filtered_mrr(dir.path(), {"-p", "checkpoint_path=model/killed"});
  MESSAGE("filtered MRR: uninterrupted ", ref_mrr, ", killed at random moments and resumed ", mrr);
  // Noise, measured on one import with this config (30 epochs, workers = 2):
  // 34 uninterrupted runs (seeds 1-32, seed 7 three times) gave filtered MRRs
  // from 0.771 to 0.808, standard deviation 0.0095, so 0.0135 for the
  // difference of two runs; 9 runs of this test gave differences from -0.042
  // to +0.016. 0.06 is 4.4 standard deviations of the difference. A broken
  // resume falls outside: restarting from fresh embeddings at the last kill
  // (4-9 epochs left) would end near a short run's MRR, measured 0.57 after 5
  // epochs, 0.64 after 8 and 0.69-0.70 after 9: about 0.09 or more below.
  CHECK(std::abs(mrr - ref_mrr) < 0.06);
  CHECK(ref_mrr > 0.7);
  CHECK(mrr > 0.7);
}

TEST_CASE("with a partition buffer (partitions on disk), abg train killed at random moments and resumed: the "
          "uninterrupted buffered run's model, bit for bit") {
  auto seed = std::random_device{}();
  INFO("random kill moments, seed ", seed);
  std::mt19937 rng(seed);
  abg::test::scratch_dir dir;
  // 4 partitions, 2 of them in the trainer's buffer, the others in the
  // partition server's store on disk: kills land in write-backs and reads too.
  abg::test::import_kinship(dir.path(), abg::test::kinship4(8));
  constexpr int epochs = 20;
  auto buffered = [](std::vector<std::string> args) {
    args.insert(args.end(), {"-p", "buffer_capacity=2", "-p", "bucket_order=buffer"});
    return args;
  };
  auto reference = abg::test::run_abg(buffered(train_args(epochs, "model/ref", 1)), dir.path());
  INFO(reference.err);
  REQUIRE(reference.exit_code == 0);

  auto args = buffered(train_args(epochs, "model/killed", 1));
  auto killed_at = kill_at_random_moments(dir.path(), args, dir / "model/killed", {{2, 5}, {7, 10}, {12, 14}}, rng);
  CHECK(killed_at < epochs);
  resume(dir.path(), args, dir / "model/killed", killed_at, epochs);
  check_same_model(dir.path(), dir / "model/ref", dir / "model/killed", epochs);
  // The partitions no trainer held lived in the store, emptied when the run
  // ended, what the kills left in it included (resume() checked it is empty).
  CHECK(fs::is_directory(dir / "model/killed/partition-store"));
}
