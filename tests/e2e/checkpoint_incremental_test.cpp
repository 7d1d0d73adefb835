// End to end through the CLI: a commit writes only the tables that changed
// since the last one. Two edge paths over one entity type in 4 partitions:
// the first holds a single edge (so at most 2 partitions are trained while
// it is), the second a ring through every entity. The version committed
// after the first path keeps the files of the untouched partitions, also
// when the run resumed just before it; the checkpoint stays readable, and
// the tables folder holds only what a committed version lists. Commits
// within an iteration (checkpoint_every_buckets) change nothing trained.
#include <doctest/doctest.h>

#include <filesystem>
#include <fmt/format.h>
#include <string>

#include "abg/storage/checkpoint.h"
#include "abg/storage/entity_store.h"
#include "tests/e2e/checkpoints.h"
#include "tests/e2e/cli.h"
#include "tests/test_util.h"

namespace fs = std::filesystem;

namespace {

constexpr const char* config = R"(entity_path = "data/ring"
edge_paths = ["data/ring/one", "data/ring/all"]
checkpoint_path = "model/ring"
dimension = 8
num_epochs = 1
workers = 1
seed = 3
eval_fraction = 0.0
checkpoint_keep_versions = 10
[entities.node]
num_partitions = 4
[[relations]]
name = "next"
lhs = "node"
rhs = "node"
operator = "translation"
)";

struct table_files {
  std::int64_t written = 0, kept = 0;
};

// How many of version v's tables it wrote itself and how many it kept from earlier.
table_files files_of(const fs::path& checkpoint_path, std::int64_t v) {
  auto m = abg::storage::read_checkpoint_manifest(abg::storage::checkpoint_version_dir(checkpoint_path, v));
  REQUIRE_MESSAGE(m.has_value(), (m ? std::string() : m.error().message));
  table_files out;
  for (auto& t : m->tables) {
    INFO(t.embeddings_file, " ", t.optimizer_file);
    auto own = fmt::format(".v{}.abgt", v);
    bool written = t.embeddings_file.ends_with(own);
    CHECK(t.optimizer_file.ends_with(own) == written); // a table's files go together
    ++(written ? out.written : out.kept);
  }
  return out;
}

// The two edge paths (a single edge, then the ring) imported into `dir` with ring.toml.
void import_ring(const fs::path& dir) {
  std::string ring, one = "n0\tnext\tn1\n";
  for (int i = 0; i < 40; ++i)
    ring += fmt::format("n{}\tnext\tn{}\n", i, (i + 1) % 40);
  abg::test::write_text(dir / "one.tsv", one);
  abg::test::write_text(dir / "ring.tsv", ring);
  abg::test::write_text(dir / "ring.toml", config);
  auto imported = abg::test::run_abg({"import", "ring.toml", "one.tsv", "ring.tsv", "--lhs-col", "0", "--rel-col", "1", "--rhs-col", "2"}, dir);
  INFO(imported.err);
  REQUIRE(imported.exit_code == 0);
}

} // namespace

TEST_CASE("abg train: a commit writes only the partitions trained since the last one, also after a resume") {
  abg::test::scratch_dir dir;
  import_ring(dir.path());
  auto model = dir / "model/ring";

  // A fresh run of 2 epochs. Version 1 (after the single edge) writes every
  // table, as the first commit of a fresh run must; version 2 (the ring)
  // trains them all. Version 3 is the single edge again: only the partitions
  // of n0 and n1 (one or two) changed, the others keep version 2's files.
  auto first = abg::test::run_abg({"train", "ring.toml", "-p", "num_epochs=2"}, dir.path());
  INFO(first.err);
  REQUIRE(first.exit_code == 0);
  CHECK(abg::test::newest_version(model) == 4);
  CHECK(files_of(model, 1).written == 4);
  CHECK(files_of(model, 2).written == 4);
  auto v3 = files_of(model, 3);
  CHECK(v3.written >= 1);
  CHECK(v3.written <= 2);
  CHECK(v3.kept == 4 - v3.written);
  CHECK(files_of(model, 4).written == 4);

  // Resumed from version 4: its tables are what the servers are seeded with,
  // so version 5 (the single edge) keeps the untouched ones' files too.
  auto second = abg::test::run_abg({"train", "ring.toml", "-p", "num_epochs=3"}, dir.path());
  INFO(second.err);
  REQUIRE(second.exit_code == 0);
  CHECK(second.err.find("(resumed at iteration 4)") != std::string::npos);
  CHECK(abg::test::newest_version(model) == 6);
  auto v5 = files_of(model, 5);
  CHECK(v5.written == v3.written); // the same edge, the same partitions
  CHECK(v5.kept == 4 - v5.written);

  // Pruned to one version: the tables folder holds exactly its files.
  auto third = abg::test::run_abg({"train", "ring.toml", "-p", "num_epochs=4", "-p", "checkpoint_keep_versions=1"},
                                  dir.path());
  INFO(third.err);
  REQUIRE(third.exit_code == 0);
  CHECK(abg::storage::committed_checkpoint_versions(model) == std::vector<std::int64_t>{8});
  abg::test::check_only_committed(model);
  CHECK(abg::test::check_loadable(model, dir / "data/ring") == 8);
  std::size_t files = 0;
  for ([[maybe_unused]] auto& f : fs::directory_iterator(model / "tables"))
    ++files;
  CHECK(files == 8);
}

TEST_CASE("abg train with a partition buffer: a commit links the partition store's files instead of copying them") {
  abg::test::scratch_dir dir;
  import_ring(dir.path());
  auto model = dir / "model/ring";
  // 4 partitions on disk, 2 in memory: every table a commit writes is the
  // store's file under a second name.
  auto run = abg::test::run_abg({"train", "ring.toml", "-p", "num_epochs=2", "-p", "buffer_capacity=2", "-p", "verbose=1"},
                                dir.path());
  INFO(run.err);
  REQUIRE(run.exit_code == 0);
  CHECK(run.err.find("checkpoint version 1: 4 table(s) written (4 linked from the partition store), 0 unchanged kept") !=
        std::string::npos);
  CHECK(run.err.find("checkpoint version 4: 4 table(s) written (4 linked from the partition store), 0 unchanged kept") !=
        std::string::npos);
  auto v3 = files_of(model, 3);
  CHECK(v3.kept == 4 - v3.written);
  // The run removed its store; the committed files stand alone and load.
  for (auto& f : fs::recursive_directory_iterator(model / "partition-store"))
    CHECK_MESSAGE(f.is_directory(), f.path().string());
  for (auto& f : fs::directory_iterator(model / "tables"))
    CHECK(fs::hard_link_count(f.path()) == 1);
  abg::test::check_only_committed(model);
  CHECK(abg::test::check_loadable(model, dir / "data/ring") == 4);
  // Resumed: seeded by linking those files into the store, and its commits link again.
  auto second = abg::test::run_abg({"train", "ring.toml", "-p", "num_epochs=3", "-p", "buffer_capacity=2", "-p", "verbose=1"},
                                   dir.path());
  INFO(second.err);
  REQUIRE(second.exit_code == 0);
  CHECK(second.err.find("(resumed at iteration 4)") != std::string::npos);
  // The servers' stores start from version 4's files themselves.
  CHECK(second.err.find("4 table(s) linked from the checkpoint into the partition store") != std::string::npos);
  CHECK(second.err.find("checkpoint version 6: 4 table(s) written (4 linked from the partition store), 0 unchanged kept") !=
        std::string::npos);
  CHECK(abg::test::check_loadable(model, dir / "data/ring") == 6);
}

// checkpoint_every_buckets: commits within the iteration bound what is
// trained but not committed (what the disk holds beside the committed
// version). With one trainer the order alone decides, so the drains before
// those commits change nothing: the tables are those of a run without them.
TEST_CASE("abg train with checkpoint_every_buckets: commits mid-iteration and trains the same tables") {
  abg::test::scratch_dir dir;
  import_ring(dir.path());
  auto train = [&](const std::string& model, std::vector<std::string> extra) {
    std::vector<std::string> args{"train",     "ring.toml", "-p", "edge_paths=data/ring/all", "-p", "num_epochs=2",
                                  "-p",        "buffer_capacity=2", "-p", "checkpoint_path=" + model};
    for (auto& e : extra) args.insert(args.end(), {"-p", e});
    auto run = abg::test::run_abg(args, dir.path());
    INFO(run.err);
    REQUIRE(run.exit_code == 0);
    return run.err;
  };
  train("model/plain", {});
  CHECK(abg::test::newest_version(dir / "model/plain") == 2);
  const auto log = train("model/often", {"checkpoint_every_buckets=5", "checkpoint_keep_versions=1"});
  // 16 buckets an iteration: at least 2 commits within each (after 5 or a
  // few more, as the drain lets the bucket being trained finish), then its own.
  std::size_t mid = 0;
  for (auto at = log.find("committed mid-iteration"); at != std::string::npos;
       at = log.find("committed mid-iteration", at + 1))
    ++mid;
  CHECK(mid >= 4);
  CHECK(log.find("bucket(s) after the last commit (checkpoint_every_buckets)") != std::string::npos);
  const auto model = dir / "model/often";
  CHECK(abg::test::newest_version(model) == static_cast<std::int64_t>(2 + mid));
  CHECK(abg::storage::committed_checkpoint_versions(model).size() == 1);
  abg::test::check_only_committed(model);
  CHECK(abg::test::table_checksums(model) == abg::test::table_checksums(dir / "model/plain"));
  // A negative interval is refused, naming the key.
  auto bad = abg::test::run_abg({"train", "ring.toml", "-p", "checkpoint_every_buckets=-1"}, dir.path());
  CHECK(bad.exit_code != 0);
  CHECK(bad.err.find("checkpoint_every_buckets") != std::string::npos);
}
