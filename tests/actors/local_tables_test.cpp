// checkpoint_mode = "local" between two partition servers in a real actor
// system, each with a folder of its own: a table saved by the server that
// holds it and replicated by the other (same files, same checksums), a
// stale version refused, the table restored into the other server from the
// replica after the original's folder is lost, an unreadable table naming
// every node tried, file names outside tables/ refused, and pruning. A
// server with its partitions on disk saves by linking its store's files.
// LibTorch first: its glog CHECK macro must not replace doctest's.
#include <torch/torch.h>

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>

#include "actors/local_tables.h"
#include "actors/spawn.h"
#include "tests/test_util.h"

using namespace abg;
using msg::tensor;
namespace fs = std::filesystem;

namespace {

constexpr auto kTimeout = std::chrono::seconds(30);

struct two_servers {
  caf::actor_system_config cfg;
  std::unique_ptr<caf::actor_system> sys;
  test::scratch_dir a_dir, b_dir;
  storage::dataset_id dataset = storage::dataset_id::random();
  actors::local_servers servers;
  explicit two_servers(bool on_disk = false) {
    msg::register_message_types(cfg);
    cfg.set("scheduler.max-threads", 2);
    cfg.set("logger.console", caf::atom("none"));
    sys = std::make_unique<caf::actor_system>(cfg);
    for (auto* dir : {&a_dir, &b_dir}) {
      actors::table_store store{dir->path(), dataset, {}};
      store.limits.request = kTimeout;
      if (on_disk) store.disk_path = storage::partition_store_dir(dir->path(), "n");
      servers.refs.push_back({actors::spawn_partition_server(*sys, "server", store), ""});
    }
    servers.nodes = {{"a", ""}, {"b", ""}};
  }
  ~two_servers() {
    caf::scoped_actor self{*sys};
    for (auto& s : servers.refs) {
      caf::anon_send_exit(s.actor, caf::exit_reason::user_shutdown);
      self->wait_for(s.actor);
    }
  }
  msg::partition_server_actor server(std::size_t i) const { return servers.refs[i].actor; }
};

const msg::partition_key key{"node", 2}; // on server 0 of 2

std::string bytes_of(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

model::table table_of(float base) {
  return {torch::arange(12, torch::kFloat32).reshape({4, 3}) + base, torch::arange(4, torch::kFloat32) - base};
}

} // namespace

TEST_CASE("checkpoint_mode = local: save, replica, restore from the replica, prune") {
  two_servers fx;
  auto& sys = *fx.sys;
  const auto t = table_of(10);
  REQUIRE(actors::store_table(sys, fx.servers.refs[0], key, t, 7, msg::any_version, kTimeout).has_value());

  // A stale version is refused and writes nothing.
  auto stale = actors::save_local_tables(sys, fx.servers, {{key, 6}}, 3, true, kTimeout);
  CHECK_FALSE(stale.has_value());
  CHECK_FALSE(fs::exists(fx.a_dir / "tables"));

  auto saved = actors::save_local_tables(sys, fx.servers, {{key, 7}}, 3, true, kTimeout);
  REQUIRE_MESSAGE(saved.has_value(), saved.error().message);
  REQUIRE(saved->size() == 1);
  auto& [emb, opt] = (*saved)[0];
  CHECK(emb.name == storage::checkpoint_table_file("embeddings", "node", 2, 3));
  CHECK(opt.name == storage::checkpoint_table_file("optimizer", "node", 2, 3));
  for (auto* f : {&emb, &opt}) {
    CHECK(f->nodes == std::vector<std::string>{"a", "b"});
    CHECK(fs::file_size(fx.a_dir / f->name) == f->bytes);
    CHECK(bytes_of(fx.a_dir / f->name) == bytes_of(fx.b_dir / f->name)); // the replica is the same file
  }

  // a's folder is lost: the table comes back from b's replica into server 1.
  fs::remove_all(fx.a_dir / "tables");
  auto restored = actors::restore_local_table(sys, fx.servers, key, 9, {&emb, &opt}, 1, kTimeout);
  REQUIRE_MESSAGE(restored.has_value(), restored.error().message);
  auto back = actors::fetch_table(sys, fx.servers.refs[1], key, 9, kTimeout);
  REQUIRE(back.has_value());
  CHECK(back->version == 9);
  CHECK(torch::equal(back->table.embeddings, t.embeddings));
  CHECK(torch::equal(back->table.state, t.state));

  // Neither node has it any more: the error names both and why.
  fs::remove_all(fx.b_dir / "tables");
  auto gone = actors::restore_local_table(sys, fx.servers, key, 9, {&emb, &opt}, 0, kTimeout);
  REQUIRE_FALSE(gone.has_value());
  CHECK(gone.error().message.find("(a, b)") != std::string::npos);
  CHECK(gone.error().message.find(emb.name) != std::string::npos);

  // A name that leaves the tables folder is refused before anything is read.
  test::write_text(fx.a_dir / "secret.abgt", "x");
  auto hostile = emb;
  hostile.name = "tables/../secret.abgt";
  auto refused = actors::restore_local_table(sys, fx.servers, key, 9, {&hostile, &opt}, 0, kTimeout);
  REQUIRE_FALSE(refused.has_value());
  CHECK(refused.error().message.find("is not a table file name") != std::string::npos);

  // Pruning keeps what is named and nothing else.
  auto again = actors::save_local_tables(sys, fx.servers, {{key, 7}}, 4, false, kTimeout);
  REQUIRE(again.has_value());
  CHECK((*again)[0][0].nodes == std::vector<std::string>{"a"});
  test::write_text(fx.a_dir / "tables/embeddings_node_2.v1.abgt", "left over");
  CHECK(actors::prune_local_tables(sys, fx.servers, {(*again)[0][0].name}, kTimeout).empty());
  CHECK(fs::exists(fx.a_dir / (*again)[0][0].name));
  CHECK_FALSE(fs::exists(fx.a_dir / (*again)[0][1].name));
  CHECK_FALSE(fs::exists(fx.a_dir / "tables/embeddings_node_2.v1.abgt"));
  CHECK(fs::exists(fx.a_dir / "secret.abgt")); // outside tables/: never touched
}

TEST_CASE("a partition server on disk saves a table by linking its store's files into the checkpoint") {
  two_servers fx(true);
  auto& sys = *fx.sys;
  const auto t = table_of(3);
  REQUIRE(actors::store_table(sys, fx.servers.refs[0], key, t, 7, msg::any_version, kTimeout).has_value());
  auto saved = actors::save_local_tables(sys, fx.servers, {{key, 7}}, 3, true, kTimeout);
  REQUIRE_MESSAGE(saved.has_value(), saved.error().message);
  const auto store_dir = storage::partition_store_dir(fx.a_dir.path(), "n");
  for (auto& f : (*saved)[0]) {
    CHECK(f.nodes == std::vector<std::string>{"a", "b"});
    CHECK(fs::file_size(fx.a_dir / f.name) == f.bytes);
    // The holder's checkpoint file is its store's file under a second name:
    // one of the two store files has the same inode.
    CHECK(fs::hard_link_count(fx.a_dir / f.name) == 2);
    bool same = false;
    for (auto& e : fs::directory_iterator(store_dir)) same = same || fs::equivalent(e.path(), fx.a_dir / f.name);
    CHECK(same);
    // The replica came over the wire into another folder: a file of its own, the same bytes.
    CHECK(fs::hard_link_count(fx.b_dir / f.name) == 1);
    CHECK(bytes_of(fx.a_dir / f.name) == bytes_of(fx.b_dir / f.name));
  }
  // The next version stored replaces the store's names; the committed files stay and restore the old table.
  REQUIRE(actors::store_table(sys, fx.servers.refs[0], key, table_of(50), 8, 7, kTimeout).has_value());
  auto& [emb, opt] = (*saved)[0];
  CHECK(fs::hard_link_count(fx.a_dir / emb.name) == 1);
  auto restored = actors::restore_local_table(sys, fx.servers, key, 9, {&emb, &opt}, 0, kTimeout);
  REQUIRE_MESSAGE(restored.has_value(), restored.error().message);
  // Restored into its own store by linking the checkpoint's files back, not copying them.
  CHECK(fs::hard_link_count(fx.a_dir / emb.name) == 2);
  CHECK(fs::hard_link_count(fx.a_dir / opt.name) == 2);
  auto back = actors::fetch_table(sys, fx.servers.refs[0], key, 9, kTimeout);
  REQUIRE(back.has_value());
  CHECK(torch::equal(back->table.embeddings, t.embeddings));
  CHECK(torch::equal(back->table.state, t.state));
}

TEST_CASE("a partition server on disk refuses to restore a damaged checkpoint file and keeps what it holds") {
  two_servers fx(true);
  auto& sys = *fx.sys;
  REQUIRE(actors::store_table(sys, fx.servers.refs[0], key, table_of(3), 7, msg::any_version, kTimeout).has_value());
  auto saved = actors::save_local_tables(sys, fx.servers, {{key, 7}}, 3, false, kTimeout);
  REQUIRE(saved.has_value());
  auto& [emb, opt] = (*saved)[0];
  REQUIRE(actors::store_table(sys, fx.servers.refs[0], key, table_of(50), 8, 7, kTimeout).has_value());
  // One payload byte flipped in the committed file (now the only name of those blocks).
  {
    std::fstream f(fx.a_dir / emb.name, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(storage::tensor_header_size) + 5);
    f.put('\x7f');
  }
  auto restored = actors::restore_local_table(sys, fx.servers, key, 9, {&emb, &opt}, 0, kTimeout);
  REQUIRE_FALSE(restored.has_value());
  CHECK(restored.error().message.find(emb.name) != std::string::npos);
  auto kept = actors::fetch_table(sys, fx.servers.refs[0], key, 0, kTimeout);
  REQUIRE(kept.has_value());
  CHECK(kept->version == 8);
  CHECK(torch::equal(kept->table.embeddings, table_of(50).embeddings));
}

TEST_CASE("a save naming several sources and a restore naming several targets are refused by name") {
  two_servers fx;
  caf::scoped_actor self{*fx.sys};
  auto other = caf::actor_cast<caf::actor>(fx.server(1));
  std::string why;
  auto refused = [&](caf::error& e) { why = fx.sys->render(e); };
  msg::table_save save{key, 7, 3, {other, other}, ""};
  self->request(fx.server(0), kTimeout, msg::save_atom::value, save)
    .receive([](std::vector<msg::table_file>&) { FAIL("a save with two sources was answered"); }, refused);
  CHECK(why.find("names 2 sources") != std::string::npos);
  why.clear();
  msg::table_restore restore{key, 9, {}, {other, other}, ""};
  self->request(fx.server(0), kTimeout, msg::restore_atom::value, restore)
    .receive([](bool) { FAIL("a restore with two targets was answered"); }, refused);
  CHECK(why.find("names 2 targets") != std::string::npos);
}
