// The cluster token between `abg node` processes (docs/security.md): a node
// with another token, and one with none, cannot join; the cluster trains
// as without them, and its coordinator logs each refusal. A node beyond
// loopback without a token refuses to start; `abg cluster token` writes a
// private token and never replaces one.
#include <doctest/doctest.h>

#include <filesystem>

#include <sys/stat.h>

#include "tests/e2e/kinship_cluster.h"

using namespace abg::test;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

TEST_CASE("abg cluster token: a private new token, never replacing one") {
  scratch_dir dir;
  auto made = run_abg({"cluster", "token", "c.token"}, dir.path());
  INFO(made.err);
  REQUIRE(made.exit_code == 0);
  struct stat st{};
  REQUIRE(::stat((dir / "c.token").c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  auto again = run_abg({"cluster", "token", "c.token"}, dir.path());
  CHECK(again.exit_code == 1);
  CHECK(again.err.find("never overwritten") != std::string::npos);
}

TEST_CASE("cluster token: nodes with another token or none cannot join; the cluster trains as without them") {
  kinship_cluster k(4);
  REQUIRE(run_abg({"cluster", "token", "right.token"}, k.dir.path()).exit_code == 0);
  REQUIRE(run_abg({"cluster", "token", "wrong.token"}, k.dir.path()).exit_code == 0);
  auto nodes = pbg_nodes(2);
  write_cluster_file(k.dir / "c.toml", nodes, 60, 60, "right.token");
  // The same cluster without its token file: a node started from it uses
  // this user's loopback token, which is not the cluster's.
  write_cluster_file(k.dir / "none.toml", nodes);
  node_process a(k.dir.path(), "c.toml", "kin.toml", "a", train_split);
  REQUIRE(a.wait_for("coordinator listening on", 60s));
  {
    const auto started = std::chrono::steady_clock::now();
    node_process wrong(k.dir.path(), "c.toml", "kin.toml", "b", train_split, "-wrong", {"--token-file", "wrong.token"});
    CHECK(wrong.exit_code(30s) == 1);
    CHECK(std::chrono::steady_clock::now() - started < 30s);
    CHECK(wrong.says("the cluster token did not match"));
    CHECK(wrong.says("wrong.token"));
    node_process none(k.dir.path(), "none.toml", "kin.toml", "b", train_split, "-none");
    CHECK(none.exit_code(30s) == 1);
    CHECK(none.says("the cluster token did not match"));
  }
  node_process b(k.dir.path(), "c.toml", "kin.toml", "b", train_split);
  CHECK(b.exit_code() == 0);
  CHECK(a.exit_code() == 0);
  if (a.log().find("buckets trained per trainer") == std::string::npos) MESSAGE(a.log());
  // The coordinator's node said who it refused, and why, once per connection.
  CHECK(a.says("refused a connection from 127.0.0.1:"));
  CHECK(a.says("the cluster token did not match"));
  CHECK(k.mrr("model/kin") > 0.3);
}

TEST_CASE("a node beyond loopback without a token file refuses to start, saying how to make one") {
  scratch_dir dir;
  auto nodes = pbg_nodes(2);
  nodes[0].host = "192.0.2.10"; // TEST-NET-1: never reached, the node stops before opening a port
  write_cluster_file(dir / "c.toml", nodes);
  write_text(dir / "kin.toml", kinship4(1));
  auto r = run_abg({"node", "c.toml", "kin.toml", "--name", "a"}, dir.path());
  CHECK(r.exit_code == 1);
  CHECK(r.err.find("beyond loopback") != std::string::npos);
  CHECK(r.err.find("abg cluster token") != std::string::npos);
  // ABG_TOKEN_FILE gives it one: a private token file is accepted (the node
  // goes on, and fails later for want of data), one others may read refused.
  REQUIRE(run_abg({"cluster", "token", "t.token"}, dir.path()).exit_code == 0);
  ::setenv("ABG_TOKEN_FILE", (dir / "t.token").c_str(), 1);
  auto with_env = run_abg({"node", "c.toml", "kin.toml", "--name", "a"}, dir.path());
  ::chmod((dir / "t.token").c_str(), 0644);
  auto readable = run_abg({"node", "c.toml", "kin.toml", "--name", "a"}, dir.path());
  ::unsetenv("ABG_TOKEN_FILE");
  CHECK(with_env.exit_code == 1);
  CHECK(with_env.err.find("beyond loopback") == std::string::npos);
  INFO(with_env.err);
  CHECK(with_env.err.find("token") == std::string::npos);
  CHECK(readable.exit_code == 1);
  CHECK(readable.err.find("chmod 600") != std::string::npos);
}
