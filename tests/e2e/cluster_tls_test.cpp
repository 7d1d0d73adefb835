// TLS between `abg node` processes (docs/security.md): certificates from
// `abg cluster certs`, a [tls] section with {name}; two nodes train Kinship
// over TLS (CAF's connections and the partition servers' bulk channels),
// and a node without TLS is refused at once.
#include <doctest/doctest.h>

#include <filesystem>
#include <regex>

#include <nlohmann/json.hpp>

#include <sys/stat.h>

#include "tests/e2e/kinship_cluster.h"

using namespace abg::test;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

TEST_CASE("TLS: abg cluster certs, then two nodes train Kinship over TLS; a node without TLS is refused") {
  kinship_cluster k(4);
  auto nodes = pbg_nodes(2);
  REQUIRE(run_abg({"cluster", "token", "c.token"}, k.dir.path()).exit_code == 0);
  write_cluster_file(k.dir / "plain.toml", nodes, 60, 60, "c.token");
  auto certs = run_abg({"cluster", "certs", "plain.toml", "certs"}, k.dir.path());
  INFO(certs.err);
  REQUIRE(certs.exit_code == 0);
  for (auto f : {"ca.pem", "ca.key", "a.pem", "a.key", "b.pem", "b.key", "console.pem", "console.key"}) CHECK(fs::exists(k.dir / "certs" / f));
  struct stat st{};
  REQUIRE(::stat((k.dir / "certs" / "a.key").c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  // Never replaces a file.
  CHECK(run_abg({"cluster", "certs", "plain.toml", "certs"}, k.dir.path()).exit_code == 1);
  auto text = read_file(k.dir / "plain.toml");
  write_text(k.dir / "c.toml", text + "\n[tls]\ncertificate = \"certs/{name}.pem\"\nkey = \"certs/{name}.key\"\n"
                                      "ca = \"certs/ca.pem\"\n");
  node_process a(k.dir.path(), "c.toml", "kin.toml", "a", train_split);
  REQUIRE(a.wait_for("coordinator listening on", 60s));
  {
    const auto started = std::chrono::steady_clock::now();
    node_process plain(k.dir.path(), "plain.toml", "kin.toml", "b", train_split, "-plain");
    CHECK(plain.exit_code(30s) == 1);
    CHECK(std::chrono::steady_clock::now() - started < 30s);
    CHECK(plain.says("it uses TLS between nodes and this node does not"));
  }
  node_process b(k.dir.path(), "c.toml", "kin.toml", "b", train_split);
  CHECK(b.exit_code() == 0);
  CHECK(a.exit_code() == 0);
  if (!a.says("buckets trained per trainer")) MESSAGE(a.log());
  CHECK(a.says("this node uses TLS between nodes and it does not"));
  // Partitions crossed between the nodes (over the bulk channels, in TLS).
  std::smatch m;
  const auto log = a.log();
  REQUIRE(std::regex_search(log, m, std::regex("traffic with the other nodes: sent [0-9.]+ MB \\(swaps ([0-9.]+)")));
  CHECK(std::stod(m[1].str()) > 0);
  CHECK(k.mrr("model/kin") > 0.3);
}

// The console of a TLS cluster (docs/console.md): `--cluster` gives it the
// token, the admin token, the inspector's address (cluster.inspect) and
// [tls] with the console's own certificate; without TLS it is refused.
TEST_CASE("TLS: abg console --cluster attaches over TLS with the console's certificate, and --admin stop ends the run") {
  kinship_cluster k(4);
  auto nodes = pbg_nodes(2);
  REQUIRE(run_abg({"cluster", "token", "c.token"}, k.dir.path()).exit_code == 0);
  REQUIRE(run_abg({"cluster", "token", "admin.token"}, k.dir.path()).exit_code == 0);
  write_cluster_file(k.dir / "plain.toml", nodes, 60, 60, "c.token");
  REQUIRE(run_abg({"cluster", "certs", "plain.toml", "certs"}, k.dir.path()).exit_code == 0);
  // The [cluster] keys go before the first [[nodes]].
  auto text = read_file(k.dir / "plain.toml");
  const auto inspect = fmt::format("127.0.0.1:{}", free_port());
  text.insert(text.find("\n[[nodes]]"),
              fmt::format("\nadmin_token_file = \"admin.token\"\ninspect = \"{}\"", inspect));
  write_text(k.dir / "plain.toml", text);
  write_text(k.dir / "c.toml", text + "\n[tls]\ncertificate = \"certs/{name}.pem\"\nkey = \"certs/{name}.key\"\n"
                                      "ca = \"certs/ca.pem\"\n");
  // Node b never starts: node a waits for it (join_timeout 60 s), its inspector answering.
  node_process a(k.dir.path(), "c.toml", "kin.toml", "a", train_split);
  REQUIRE(a.wait_for("inspector listening on " + inspect, 60s));

  auto nodes_view = run_abg({"console", "--cluster", "c.toml", "--exec", "nodes", "--json"}, k.dir.path());
  INFO(nodes_view.err);
  REQUIRE(nodes_view.exit_code == 0);
  auto doc = nlohmann::json::parse(nodes_view.out, nullptr, false);
  REQUIRE_FALSE(doc.is_discarded());
  CHECK(doc["phase"] == "joining");
  REQUIRE(doc["nodes"].size() == 2);
  CHECK(doc["nodes"][0]["state"] == "alive");
  CHECK(doc["nodes"][1]["state"] == "not joined");

  // The same console without TLS: the node refuses it, and logs why.
  auto plain = run_abg({"console", "--cluster", "plain.toml", "--exec", "nodes"}, k.dir.path());
  CHECK(plain.exit_code == 1);
  CHECK(a.wait_for("refused a connection from", 10s));

  // Read-only without --admin; with it (the cluster file's admin token), stop.
  CHECK(run_abg({"console", "--cluster", "c.toml", "--exec", "stop"}, k.dir.path()).exit_code == 1);
  auto stop = run_abg({"console", "--cluster", "c.toml", "--admin", "--exec", "stop"}, k.dir.path());
  INFO(stop.err);
  INFO(stop.out);
  INFO(a.log());
  CHECK(stop.exit_code == 0);
  CHECK(stop.out.find("stopping now (the run is joining)") != std::string::npos);
  CHECK(a.wait_for("stopping, as an admin console asked", 10s));
  CHECK(a.exit_code(30s) == 0);
  CHECK(a.says("stopped by an admin console"));
}
