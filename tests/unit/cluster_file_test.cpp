// Cluster files (abg/cluster.h, docs/cluster.md): the shipped ones load, bad
// ones are refused naming file:line:column and the fix; PBG's layout and its
// distributed_init_method.
#include <doctest/doctest.h>

#include <filesystem>

#include "abg/certs.h"
#include "abg/cluster.h"
#include "tests/test_util.h"

namespace fs = std::filesystem;

namespace {

const fs::path source_root = fs::path(__FILE__).parent_path().parent_path().parent_path();

abg::expected<abg::cluster_spec> parse(const std::string& text) {
  static abg::test::scratch_dir dir;
  auto file = dir / "cluster.toml";
  abg::test::write_text(file, text);
  return abg::read_cluster_file(file);
}

const char* two_nodes = R"([cluster]
heartbeat_interval = 0.5
heartbeat_timeout = 3

[[nodes]]
name = "a"
host = "127.0.0.1"
port = 29700
roles = ["coordinator", "lock_server", "trainer", "partition_server", "parameter_server"]

[[nodes]]
name = "b"
host = "127.0.0.1"
port = 29701
roles = ["trainer", "partition_server", "parameter_server"]
)";

} // namespace

TEST_CASE("cluster files: the shipped ones load") {
  int found = 0;
  for (const auto& e : fs::directory_iterator(source_root / "config")) {
    if (!e.path().filename().string().starts_with("cluster-")) continue;
    CAPTURE(e.path());
    auto spec = abg::read_cluster_file(e.path());
    REQUIRE_MESSAGE(spec, (spec ? "" : spec.error().message));
    CHECK(spec->count(abg::role::coordinator) == 1);
    ++found;
  }
  CHECK(found >= 1);
}

TEST_CASE("cluster files: nodes, roles and timings") {
  auto spec = parse(two_nodes);
  REQUIRE_MESSAGE(spec, (spec ? "" : spec.error().message));
  REQUIRE(spec->nodes.size() == 2);
  CHECK(spec->heartbeat_interval == std::chrono::milliseconds(500));
  CHECK(spec->heartbeat_timeout == std::chrono::milliseconds(3000));
  CHECK(spec->join_timeout == std::chrono::milliseconds(120000)); // default
  CHECK(spec->coordinator() == 0);
  CHECK(spec->with(abg::role::trainer) == std::vector<std::size_t>{0, 1});
  CHECK(spec->find("b") == std::optional<std::size_t>(1));
  CHECK_FALSE(spec->find("c"));
  CHECK(spec->nodes[1].port == 29701);
  CHECK(spec->nodes[1].has(abg::role::parameter_server));
  CHECK_FALSE(spec->nodes[1].has(abg::role::lock_server));
  CHECK(spec->token_file.empty());
  CHECK(spec->handshake_timeout == std::chrono::milliseconds(5000));
  CHECK(spec->max_pending_connections == 64);
}

TEST_CASE("cluster files: the token file relative to the cluster file, and the handshake's limits") {
  std::string text = two_nodes;
  text.replace(text.find("[cluster]\n"), 10,
               "[cluster]\ntoken_file = \"secrets/cluster.token\"\nadmin_token_file = \"admin.token\"\n"
               "inspect = \"127.0.0.1:29799\"\n"
               "handshake_timeout = 2.5\nmax_pending_connections = 8\n");
  auto spec = parse(text);
  REQUIRE_MESSAGE(spec, (spec ? "" : spec.error().message));
  CHECK(fs::path(spec->token_file).filename() == "cluster.token");
  CHECK(fs::path(spec->token_file).parent_path().filename() == "secrets");
  CHECK(fs::path(spec->token_file).is_absolute() == fs::path(spec->source).is_absolute());
  CHECK(fs::path(spec->admin_token_file).filename() == "admin.token");
  CHECK(spec->inspect == "127.0.0.1:29799");
  CHECK(fs::path(spec->admin_token_file).parent_path() == fs::path(spec->token_file).parent_path().parent_path());
  CHECK(spec->handshake_timeout == std::chrono::milliseconds(2500));
  CHECK(spec->max_pending_connections == 8);
}

TEST_CASE("cluster files: [tls] with each node's files through {name}") {
  auto spec = parse(std::string(two_nodes) +
                    "\n[tls]\ncertificate = \"certs/{name}.pem\"\nkey = \"/keys/{name}.key\"\nca = \"certs/ca.pem\"\n");
  REQUIRE_MESSAGE(spec, (spec ? "" : spec.error().message));
  REQUIRE(spec->tls.enabled());
  auto b = spec->tls.of_node("b");
  CHECK(fs::path(b.certificate).filename() == "b.pem");
  CHECK(fs::path(b.certificate).parent_path().filename() == "certs");
  CHECK(b.key == "/keys/b.key");
  CHECK(fs::path(b.ca).filename() == "ca.pem");
  CHECK_FALSE(parse(two_nodes)->tls.enabled());
  auto missing = parse(std::string(two_nodes) + "\n[tls]\ncertificate = \"a.pem\"\nkey = \"a.key\"\n");
  REQUIRE_FALSE(missing);
  CHECK(missing.error().message.find("[tls] needs ca") != std::string::npos);
  auto unknown = parse(std::string(two_nodes) + "\n[tls]\ncertificate = \"a\"\nkey = \"b\"\nca = \"c\"\ncafile = \"d\"\n");
  REQUIRE_FALSE(unknown);
  CHECK(unknown.error().message.find("unknown key 'tls.cafile'") != std::string::npos);
}

TEST_CASE("cluster files: every problem named with its place") {
  auto refused = [](const std::string& text, const std::string& needle) {
    auto spec = parse(text);
    REQUIRE_FALSE(spec);
    CAPTURE(spec.error().message);
    CHECK(spec.error().message.find(needle) != std::string::npos);
    CHECK(spec.error().message.find("cluster.toml") != std::string::npos);
  };
  std::string text = two_nodes;
  auto replace = [&](const std::string& from, const std::string& to) {
    auto t = text;
    t.replace(t.find(from), from.size(), to);
    return t;
  };
  refused(replace("name = \"b\"", "name = \"a\""), "node name 'a' appears twice");
  refused(replace("port = 29701", "port = 29700"), "is another node's address too");
  refused(replace("port = 29701", "port = 70000"), "needs a port in [1, 65535]");
  refused(replace("\"trainer\", \"partition_server\", \"parameter_server\"]", "\"trainer\", \"chef\"]"), "unknown role");
  refused(replace("[\"trainer\", \"partition_server\", \"parameter_server\"]",
                  "[\"coordinator\", \"lock_server\", \"trainer\"]"),
          "exactly one node with role coordinator");
  refused(replace("heartbeat_timeout = 3", "heartbeat_timeout = 0.7"), "at least twice");
  refused(replace("heartbeat_timeout = 3", "heartbeat_timout = 3"), "unknown key 'cluster.heartbeat_timout'");
  refused(replace("host = \"127.0.0.1\"\nport = 29701", "port = 29701"), "needs a host");
  refused("[cluster]\n", "no [[nodes]]");
  refused(replace("heartbeat_timeout = 3", "heartbeat_timeout = 3\nmax_pending_connections = 0"),
          "max_pending_connections must be an integer in [1, 65536]");
  refused(replace("heartbeat_timeout = 3", "heartbeat_timeout = 3\ntoken_file = \"\""), "abg cluster token");
  refused(replace("heartbeat_timeout = 3", "heartbeat_timeout = 3\nadmin_token_file = 7"), "admin_token_file must be");
  refused(replace("heartbeat_timeout = 3", "heartbeat_timeout = 3\ninspect = \"127.0.0.1\""), "cluster.inspect must be");
  refused("[[nodes]]\nname = \"a\"\nhost = \"x\"\nport = 1\nroles = [\"coordinator\", \"lock_server\", \"trainer\"]\n",
          "at least one node with role partition_server");
  refused("[[nodes]\n", "cluster.toml:1:");
  // Two trainers need somewhere to share their parameters.
  refused("[[nodes]]\nname = \"a\"\nhost = \"x\"\nport = 1\n"
          "roles = [\"coordinator\", \"lock_server\", \"trainer\", \"partition_server\"]\n"
          "[[nodes]]\nname = \"b\"\nhost = \"x\"\nport = 2\nroles = [\"trainer\"]\n",
          "give at least one node the role parameter_server");
}

TEST_CASE("PBG's layout and distributed_init_method") {
  auto two = abg::pbg_layout(2, -1);
  REQUIRE(two.nodes.size() == 2);
  CHECK(two.nodes[0].name == "rank0");
  CHECK(two.nodes[0].has(abg::role::coordinator));
  CHECK(two.nodes[0].has(abg::role::lock_server));
  for (auto& n : two.nodes) {
    CHECK(n.has(abg::role::trainer));
    CHECK(n.has(abg::role::parameter_server));
    CHECK(n.has(abg::role::partition_server));
  }
  auto dedicated = abg::pbg_layout(2, 3);
  REQUIRE(dedicated.nodes.size() == 5);
  CHECK(dedicated.count(abg::role::partition_server) == 3);
  CHECK(dedicated.nodes[4].name == "rank4");
  CHECK_FALSE(dedicated.nodes[4].has(abg::role::trainer));
  auto none = abg::pbg_layout(3, 0);
  CHECK(none.with(abg::role::partition_server) == std::vector<std::size_t>{0});
  auto tcp = abg::parse_init_method("tcp://10.0.0.5:29500");
  REQUIRE(tcp);
  CHECK_FALSE(tcp->file);
  CHECK(tcp->host == "10.0.0.5");
  CHECK(tcp->port == 29500);
  auto file = abg::parse_init_method("file:///shared/rendezvous");
  REQUIRE(file);
  CHECK(file->file);
  CHECK(file->path == "/shared/rendezvous");
  CHECK_FALSE(abg::parse_init_method("tcp://host"));
  CHECK_FALSE(abg::parse_init_method("tcp://host:0"));
  CHECK_FALSE(abg::parse_init_method("file://relative"));
  CHECK_FALSE(abg::parse_init_method("env://"));
}

TEST_CASE("abg cluster certs refuses a node named like the CA's or the console's files, writing nothing") {
  std::string text = two_nodes;
  text.replace(text.find("name = \"b\""), 10, "name = \"console\"");
  auto spec = parse(text);
  REQUIRE(spec);
  abg::test::scratch_dir out;
  auto written = abg::write_cluster_certificates(*spec, out / "certs");
  REQUIRE_FALSE(written);
  CHECK(written.error().message.find("node 'console'") != std::string::npos);
  CHECK_FALSE(fs::exists(out / "certs"));
}
