// checkpoint_mode = "local" end to end. Two nodes as processes on loopback,
// each in a folder of its own (no shared filesystem): each partition server
// writes its own partitions into its own checkpoint path, with
// checkpoint_replicas = 1 also a copy of the other's, and the coordinator's
// manifest names the nodes that hold each file. A node that lost its tables
// folder resumes from the replicas; without replicas the resume fails,
// naming the node. One process with 2 simulated machines writes the same
// layout into its one folder and resumes from it.
#include <doctest/doctest.h>

#include <filesystem>
#include <set>

#include "abg/storage/checkpoint.h"
#include "tests/e2e/kinship_cluster.h"

using namespace abg::test;
namespace fs = std::filesystem;
namespace storage = abg::storage;

namespace {

const std::vector<std::string> local_mode{"checkpoint_mode=local"};

// Node b works in a folder of its own holding the cluster file and the
// config only (it fetches the data at join).
fs::path separate_folder(kinship_cluster& k, const std::string& cluster) {
  const auto bdir = k.dir / "b";
  fs::create_directories(bdir);
  fs::copy_file(k.dir / cluster, bdir / cluster, fs::copy_options::overwrite_existing);
  fs::copy_file(k.dir / "kin.toml", bdir / "kin.toml", fs::copy_options::overwrite_existing);
  return bdir;
}

std::set<std::string> table_files_in(const fs::path& checkpoint_path) {
  std::set<std::string> out;
  std::error_code ec;
  for (auto& e : fs::directory_iterator(checkpoint_path / "tables", ec)) out.insert("tables/" + e.path().filename().string());
  return out;
}

storage::checkpoint_manifest manifest(const fs::path& checkpoint_path, std::int64_t version) {
  auto m = storage::read_checkpoint_manifest(storage::checkpoint_version_dir(checkpoint_path, version));
  REQUIRE_MESSAGE(m.has_value(), m.error().message);
  return *m;
}

} // namespace

TEST_CASE("checkpoint_mode = local on 2 nodes: each writes its own partitions and a replica; a lost tables folder "
          "is survived") {
  kinship_cluster k(6);
  auto nodes = pbg_nodes(2);
  write_cluster_file(k.dir / "c.toml", nodes);
  const auto bdir = separate_folder(k, "c.toml");
  const auto opts = with(with(train_split, local_mode), {"checkpoint_replicas=1"});
  const auto a_model = k.dir / "model/kin", b_model = bdir / "model/kin";
  {
    node_process a(k.dir.path(), "c.toml", "kin.toml", "a", with(opts, {"num_epochs=2"}));
    node_process b(bdir, "c.toml", "kin.toml", "b", with(opts, {"num_epochs=2"}));
    CHECK(b.exit_code() == 0);
    CHECK(a.exit_code() == 0);
  }
  REQUIRE(storage::committed_checkpoint_versions(a_model).back() == 2);
  CHECK(storage::committed_checkpoint_versions(b_model).empty()); // only the coordinator commits
  auto m = manifest(a_model, 2);
  REQUIRE(m.tables.size() == 4);
  for (auto& t : m.tables) {
    // Partition k on server k mod 2: a's (node 0) and b's, each replicated on the other.
    const std::vector<std::string> expected =
      t.partition % 2 == 0 ? std::vector<std::string>{"a", "b"} : std::vector<std::string>{"b", "a"};
    for (auto* name : {&t.embeddings_file, &t.optimizer_file}) {
      const auto* f = m.file(*name);
      REQUIRE(f != nullptr);
      CHECK(f->nodes == expected);
      CHECK(fs::file_size(a_model / *name) == f->bytes);
      CHECK(fs::file_size(b_model / *name) == f->bytes);
    }
  }
  // b's disk is lost: the resumed run reads b's partitions from a's replicas.
  fs::remove_all(b_model / "tables");
  {
    node_process a(k.dir.path(), "c.toml", "kin.toml", "a", with(opts, {"num_epochs=6"}), "-2");
    node_process b(bdir, "c.toml", "kin.toml", "b", with(opts, {"num_epochs=6"}), "-2");
    CHECK(b.exit_code() == 0);
    CHECK(a.exit_code() == 0);
    CHECK(a.says("resuming from checkpoint version 2"));
  }
  REQUIRE(storage::committed_checkpoint_versions(a_model).back() == 6);
  // Each node holds exactly what the kept versions list on it (pruned, the
  // restored partitions written again).
  auto listed = storage::listed_table_files(a_model);
  REQUIRE(listed.has_value());
  for (const auto& [node, dir] : {std::pair{"a", a_model}, std::pair{"b", b_model}}) {
    std::set<std::string> expected;
    for (auto v : storage::committed_checkpoint_versions(a_model))
      for (auto& f : manifest(a_model, v).files)
        if (std::find(f.nodes.begin(), f.nodes.end(), node) != f.nodes.end()) expected.insert(f.name);
    CHECK(!expected.empty());
    CHECK(table_files_in(dir) == expected);
  }
  // With the replicas, a's folder alone is a whole checkpoint: evaluated there.
  CHECK(k.mrr("model/kin") > 0.5);
}

TEST_CASE("checkpoint_mode = local without replicas: a node's lost tables folder fails the resume, naming it") {
  kinship_cluster k(2);
  auto nodes = pbg_nodes(2);
  write_cluster_file(k.dir / "c.toml", nodes, /*server_wait=*/10);
  const auto bdir = separate_folder(k, "c.toml");
  const auto opts = with(train_split, local_mode);
  {
    node_process a(k.dir.path(), "c.toml", "kin.toml", "a", with(opts, {"num_epochs=1"}));
    node_process b(bdir, "c.toml", "kin.toml", "b", with(opts, {"num_epochs=1"}));
    CHECK(b.exit_code() == 0);
    CHECK(a.exit_code() == 0);
  }
  auto m = manifest(k.dir / "model/kin", 1);
  const auto* odd = m.table("all", 1);
  REQUIRE(odd != nullptr);
  CHECK(m.file(odd->embeddings_file)->nodes == std::vector<std::string>{"b"});
  CHECK(!fs::exists(k.dir / "model/kin" / odd->embeddings_file)); // b's alone
  fs::remove_all(bdir / "model/kin/tables");
  node_process a(k.dir.path(), "c.toml", "kin.toml", "a", with(opts, {"num_epochs=2"}), "-2");
  node_process b(bdir, "c.toml", "kin.toml", "b", with(opts, {"num_epochs=2"}), "-2");
  CHECK(a.exit_code() != 0);
  CHECK(b.exit_code() != 0);
  CHECK(a.says("could not be read from any node that holds it (b)"));
  CHECK(a.says(odd->embeddings_file));
  CHECK(storage::committed_checkpoint_versions(k.dir / "model/kin").back() == 1); // nothing lost or overwritten
}

TEST_CASE("checkpoint_mode = local in one process: 2 simulated machines write into one folder and resume") {
  kinship_cluster k(2);
  const std::vector<std::string> opts{"-p", "edge_paths=data/kin/train", "-p", "num_machines=2",
                                      "-p", "checkpoint_mode=local",     "-p", "checkpoint_replicas=1"};
  auto first = run_abg(with(with({"train", "kin.toml"}, opts), {"-p", "num_epochs=1"}), k.dir.path());
  INFO(first.err);
  REQUIRE(first.exit_code == 0);
  auto m = manifest(k.dir / "model/kin", 1);
  for (auto& t : m.tables) CHECK(m.file(t.embeddings_file)->nodes.size() == 2);
  auto second = run_abg(with(with({"train", "kin.toml"}, opts), {"-p", "num_epochs=2"}), k.dir.path());
  INFO(second.err);
  REQUIRE(second.exit_code == 0);
  CHECK(second.err.find("resumed at iteration 1") != std::string::npos);
  CHECK(table_files_in(k.dir / "model/kin") == *storage::listed_table_files(k.dir / "model/kin"));
}
