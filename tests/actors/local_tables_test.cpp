// checkpoint_mode = "local" between two partition servers in a real actor
// system, each with a folder of its own: a table saved by the server that
// holds it and replicated by the other (same files, same checksums), a
// stale version refused, the table restored into the other server from the
// replica after the original's folder is lost, an unreadable table naming
// every node tried, file names outside tables/ refused, and pruning.
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
  two_servers() {
    msg::register_message_types(cfg);
    cfg.set("scheduler.max-threads", 2);
    cfg.set("logger.console", caf::atom("none"));
    sys = std::make_unique<caf::actor_system>(cfg);
    for (auto* dir : {&a_dir, &b_dir}) {
      actors::table_store store{dir->path(), dataset, {}};
      store.limits.request = kTimeout;
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
