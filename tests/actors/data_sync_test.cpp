// A node's copy of the data against the coordinator's (actors/data_server.cpp,
// actors/node/data_sync.cpp): the listing, reads by index only, files that
// differ fetched into another folder byte for byte, a refusal naming the
// file without fetching, and a listing that names a path refused.
// LibTorch (through spawn.h) first: its glog CHECK macro must not replace doctest's.
#include "actors/spawn.h"

#include <doctest/doctest.h>

#include <fstream>
#include <iterator>

#include <fmt/format.h>

#include "abg/config.h"
#include "abg/import.h"
#include "abg/storage/dataset_files.h"
#include "abg/storage/files.h"
#include "abg/version.h"
#include "actors/blocking_peer.h"
#include "actors/node/data_sync.h"
#include "tests/test_util.h"

namespace fs = std::filesystem;
using namespace abg;
using namespace std::chrono_literals;

namespace {

std::string toml_in(const fs::path& root) {
  return fmt::format(R"(entity_path = "{0}/ent"
edge_paths = ["{0}/edges"]
checkpoint_path = "{0}/model"
dimension = 4
[entities.node]
num_partitions = 2
[[relations]]
name = "r"
lhs = "node"
rhs = "node"
)",
                     root.string());
}

config load(const std::string& toml) {
  auto c = parse_config(toml, "test.toml");
  REQUIRE_MESSAGE(c, (c ? "" : c.error().message));
  return c->value;
}

std::string bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

struct fixture {
  test::scratch_dir dir;
  caf::actor_system_config sys_cfg;
  std::unique_ptr<caf::actor_system> sys;
  std::string toml = toml_in(dir / "coordinator");
  config cfg = load(toml);
  msg::data_server_actor server;
  fixture() {
    std::string text;
    for (int i = 0; i < 2000; ++i) text += fmt::format("n{}\tn{}\n", i % 200, (i * 7 + 3) % 200);
    test::write_text(dir / "edges.tsv", text);
    import_options o;
    o.inputs = {dir / "edges.tsv"};
    o.lhs_col = 0;
    o.rhs_col = 1;
    auto imported = run_import(cfg, o);
    REQUIRE_MESSAGE(imported, (imported ? "" : imported.error().message));
    msg::register_message_types(sys_cfg);
    sys_cfg.set("scheduler.max-threads", 2);
    sys_cfg.set("logger.console", caf::atom("none"));
    sys = std::make_unique<caf::actor_system>(sys_cfg);
    server = actors::spawn_data_server(*sys, cfg, {"id", storage::checksum_hex(storage::checksum(toml)),
                                                   std::string(abg_version), {}});
  }
  ~fixture() {
    caf::anon_send_exit(server, caf::exit_reason::user_shutdown);
    caf::scoped_actor self{*sys};
    self->wait_for(server);
  }
};

} // namespace

TEST_CASE("the data server lists the dataset's files and serves them by index only") {
  fixture fx;
  actors::blocking_peer peer(*fx.sys, fx.server, 30s);
  auto listing = peer.ask<msg::data_listing>("list", msg::list_atom::value);
  REQUIRE(listing);
  // 4 buckets and the manifest, 2 names files and entities.json; commit points last within their root.
  REQUIRE(listing->files.size() == 4 + 1 + 2 + 1);
  CHECK(listing->files[4].name == "manifest.json");
  CHECK(listing->files.back().name == "entities.json");
  for (auto& f : listing->files) {
    CAPTURE(f.name);
    const auto path = storage::dataset_root(fx.cfg, f.root) / f.name;
    CHECK(fs::file_size(path) == f.bytes);
    CHECK(storage::file_checksum(path).value() == f.checksum);
  }
  auto got = peer.ask<std::vector<char>>("read", msg::read_atom::value, uint32_t{0}, uint64_t{0});
  REQUIRE(got);
  CHECK(std::string(got->begin(), got->end()) ==
        bytes(storage::dataset_root(fx.cfg, listing->files[0].root) / listing->files[0].name));
  auto beyond = peer.ask<std::vector<char>>("read", msg::read_atom::value, uint32_t{99}, uint64_t{0});
  REQUIRE_FALSE(beyond);
  CHECK(beyond.error().message.find("data file 99 does not exist") != std::string::npos);
  auto past = peer.ask<std::vector<char>>("read", msg::read_atom::value, uint32_t{0}, uint64_t{1} << 40);
  REQUIRE_FALSE(past);
  CHECK(past.error().message.find("past the end") != std::string::npos);
}

TEST_CASE("a node's missing or different files are fetched; without fetching it is refused, naming the file") {
  fixture fx;
  // The node's own folders; it is started with the coordinator's config text (the digest matches).
  auto node_cfg = load(toml_in(fx.dir / "node"));
  std::vector<std::string> said;
  auto log = [&](const std::string& line) { said.push_back(line); };
  // Nothing there: refused without fetching, naming the first file.
  auto refused = actors::sync_data(*fx.sys, fx.server, node_cfg, fx.toml, false, {}, nullptr, log);
  REQUIRE_FALSE(refused);
  CHECK(refused.error().message.find("this node's data differs from the coordinator's: edges_0_0.abgb of edge_paths[0]") !=
        std::string::npos);
  CHECK(refused.error().message.find("missing") != std::string::npos);
  CHECK_FALSE(fs::exists(fx.dir / "node"));
  // Fetched: every file byte for byte.
  auto fetched = actors::sync_data(*fx.sys, fx.server, node_cfg, fx.toml, true, {}, nullptr, log);
  REQUIRE_MESSAGE(fetched, (fetched ? "" : fetched.error().message));
  CHECK(fetched->fetched == fetched->files);
  for (const auto* sub : {"ent", "edges"})
    for (auto& e : fs::directory_iterator(fx.dir / "coordinator" / sub)) {
      if (e.path().filename().string().starts_with(".")) continue;
      CAPTURE(e.path().string());
      CHECK(bytes(e.path()) == bytes(fx.dir / "node" / sub / e.path().filename()));
    }
  REQUIRE(said.size() == 1);
  CHECK(said[0].find("fetched 8 of 8 data files") == 0);
  // Only what differs the next time.
  { std::ofstream(fx.dir / "node/edges/edges_1_0.abgb", std::ios::binary | std::ios::app) << "x"; }
  auto again = actors::sync_data(*fx.sys, fx.server, node_cfg, fx.toml, true, {}, nullptr, log);
  REQUIRE(again);
  CHECK(again->fetched == 1);
  CHECK(bytes(fx.dir / "node/edges/edges_1_0.abgb") == bytes(fx.dir / "coordinator/edges/edges_1_0.abgb"));
  // Another config than the coordinator's: refused before anything is compared.
  auto other = actors::sync_data(*fx.sys, fx.server, node_cfg, fx.toml + "\n# changed\n", true, {}, nullptr, log);
  REQUIRE_FALSE(other);
  CHECK(other.error().message.find("another training config than the coordinator") != std::string::npos);
}

TEST_CASE("a listing that names a path outside the node's data folders is refused") {
  fixture fx;
  auto node_cfg = load(toml_in(fx.dir / "node"));
  for (const auto& [root, name] : std::vector<std::pair<uint32_t, std::string>>{
         {0, "../escape"}, {0, "sub/file"}, {5, "edges_0_0.abgb"}, {0, ".."}}) {
    CAPTURE(name);
    msg::data_listing hostile{"id", storage::checksum_hex(storage::checksum(fx.toml)), std::string(abg_version),
                              {{root, name, 3, 0}}};
    auto fake = fx.sys->spawn([hostile](msg::data_server_actor::pointer) -> msg::data_server_actor::behavior_type {
      return {[hostile](msg::list_atom) { return hostile; },
              [](msg::read_atom, uint32_t, uint64_t) { return std::vector<char>{'a', 'b', 'c'}; }};
    });
    auto r = actors::sync_data(*fx.sys, fake, node_cfg, fx.toml, true, {}, nullptr, {});
    REQUIRE_FALSE(r);
    CHECK(r.error().message.find("that this config has no place for") != std::string::npos);
    caf::anon_send_exit(fake, caf::exit_reason::user_shutdown);
  }
  CHECK_FALSE(fs::exists(fx.dir / "escape"));
}
