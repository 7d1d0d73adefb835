// End to end through the CLI: `abg info CONFIG --schedule` prints the
// partition loads of every bucket order for a bounded buffer, from the config
// alone, and refuses a capacity no bucket fits in.
#include <doctest/doctest.h>

#include <string>

#include "tests/e2e/cli.h"
#include "tests/test_util.h"

TEST_CASE("abg info --schedule: partition loads per order for a buffer of K partitions") {
  abg::test::scratch_dir dir;
  abg::test::write_text(dir / "g.toml", R"(entity_path = "nowhere"
edge_paths = ["nowhere/train"]
checkpoint_path = "model"
dimension = 8
[entities.node]
num_partitions = 16
[[relations]]
name = "r"
lhs = "node"
rhs = "node"
)");
  auto r = abg::test::run_abg({"info", "g.toml", "--schedule", "--capacity", "4"}, dir.path());
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.find("16x16 buckets (one partitioned type on both sides), a trainer holding at most 4 partitions") !=
        std::string::npos);
  CHECK(r.out.find("inside_out        129 evicting the least recently used,      100 evicting the one needed last") !=
        std::string::npos);
  CHECK(r.out.find("buffer            106 evicting the least recently used,       46 evicting the one needed last") !=
        std::string::npos);
  // A run's lock server keeps one of the 4 for reading ahead: the buffer order for 3.
  CHECK(r.out.find("with buffer_capacity = 4 keeps one of them to read the next bucket's partitions ahead while it "
                   "trains, and plans for 3: in the buffer order it loads 65 partitions an epoch") != std::string::npos);
  // Without --capacity: the config's buffer_capacity.
  auto configured = abg::test::run_abg({"info", "g.toml", "--schedule", "-p", "buffer_capacity=3"}, dir.path());
  INFO(configured.err);
  REQUIRE(configured.exit_code == 0);
  CHECK(configured.out.find("a trainer holding at most 3 partitions") != std::string::npos);
  auto bad = abg::test::run_abg({"info", "g.toml", "--schedule", "--capacity", "1"}, dir.path());
  CHECK(bad.exit_code == 1);
  CHECK(bad.err.find("--capacity 1: a bucket needs 2 partitions") != std::string::npos);
}
