// `abg console` against live runs (docs/console.md): a single-process `abg
// train` on Kinship and a 2-node loopback cluster each print where their
// inspector listens; every view comes back as JSON that agrees with the run,
// and as text; a console with another token is refused and the run goes on;
// a single-process run's token file is private and gone when the run ends,
// and one a killed run left on a reused port is skipped.
#include <doctest/doctest.h>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <regex>
#include <set>
#include <sstream>
#include <thread>
#include <string>

#include <sys/stat.h>

#include <nlohmann/json.hpp>

#include "abg/token.h"
#include "tests/e2e/checkpoints.h"
#include "tests/e2e/cli.h"
#include "tests/e2e/inspector_address.h"
#include "tests/e2e/kinship_cluster.h"
#include "tests/test_util.h"

using namespace std::chrono_literals;
using namespace abg::test;

namespace {

nlohmann::json view(const std::filesystem::path& dir, const std::string& address, const std::string& name,
                    const std::vector<std::string>& extra = {}) {
  std::vector<std::string> args{"console", address, "--exec", name, "--json"};
  args.insert(args.end(), extra.begin(), extra.end());
  auto r = run_abg(args, dir);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  auto doc = nlohmann::json::parse(r.out, nullptr, false);
  REQUIRE_FALSE(doc.is_discarded());
  CHECK(doc["view"] == name);
  return doc;
}

bool has_role(const nlohmann::json& node, const std::string& role) {
  for (const auto& r : node["roles"])
    if (r == role) return true;
  return false;
}

} // namespace

TEST_CASE("abg console attaches to a single-process abg train: every view, as JSON and as text, behind its token") {
  scratch_dir dir;
  import_kinship(dir.path());
  // Long enough to look at while it trains (about 75 ms an epoch); stopped by SIGINT below.
  abg_process run({"train", "kin.toml", "-p", "edge_paths=data/kin/train", "-p", "num_epochs=3000"}, dir.path(),
                  dir / "train.err");
  REQUIRE(run.started());
  std::string address;
  REQUIRE(run.wait_until(
    [&] {
      address = inspector_address(read_file(dir / "train.err"));
      return !address.empty() && newest_version(dir / "model/kin") >= 1;
    },
    120s));
  INFO(read_file(dir / "train.err"));
  CHECK(address.starts_with("127.0.0.1:"));

  auto nodes = view(dir.path(), address, "nodes");
  const auto phase = nodes["phase"].get<std::string>();
  CHECK((phase == "training" || phase == "finishing")); // an iteration, or between two
  REQUIRE(nodes["nodes"].size() == 1);
  CHECK(nodes["nodes"][0]["state"] == "alive");
  CHECK(has_role(nodes["nodes"][0], "coordinator"));
  CHECK(has_role(nodes["nodes"][0], "trainer"));

  auto buckets = view(dir.path(), address, "buckets");
  CHECK(buckets["total"] == 1);
  REQUIRE(buckets["grid"].size() == 1);
  CHECK(buckets["done"].get<int>() + buckets["training"].get<int>() + buckets["waiting"].get<int>() == 1);
  CHECK(buckets["iteration"].get<int>() >= 1); // a version is committed

  auto trainers = view(dir.path(), address, "trainers");
  REQUIRE(trainers["trainers"].size() == 1);
  const auto state = trainers["trainers"][0]["state"].get<std::string>();
  CHECK((state == "training" || state == "idle"));
  CHECK(trainers["trainers"][0]["buckets_trained"].get<int>() >= 1);

  // One process: no traffic between nodes, and the text says so.
  auto traffic = view(dir.path(), address, "traffic");
  CHECK(traffic["nodes"].empty());
  CHECK(traffic["pairs"].empty());
  auto traffic_text = run_abg({"console", address, "--exec", "traffic"}, dir.path());
  CHECK(traffic_text.out.find("a single process has no traffic between nodes") != std::string::npos);

  auto events = view(dir.path(), address, "events");
  bool joined = false, committed = false;
  for (const auto& e : events["events"]) {
    const auto line = e["text"].get<std::string>();
    joined |= line.find("joined") != std::string::npos;
    committed |= line.find("iteration 1 done (epoch 0, edge path 0, chunk 0): 8548 edges, checkpoint version 1") !=
                 std::string::npos;
  }
  CHECK(joined);
  CHECK(committed);

  auto text = run_abg({"console", address, "--exec", "buckets"}, dir.path());
  CHECK(text.exit_code == 0);
  CHECK(text.out.find("buckets done") != std::string::npos);
  CHECK(text.out.find("iteration") != std::string::npos);
  auto nodes_text = run_abg({"console", address, "--exec", "nodes"}, dir.path());
  CHECK(nodes_text.out.find("alive") != std::string::npos);

  auto unknown = run_abg({"console", address, "--exec", "nope"}, dir.path());
  CHECK(unknown.exit_code == 1);
  CHECK(unknown.err.find("no view or command 'nope'") != std::string::npos);

  // Another token: refused, and the run goes on.
  REQUIRE(run_abg({"cluster", "token", "other.token"}, dir.path()).exit_code == 0);
  auto refused = run_abg({"console", address, "--exec", "nodes", "--token-file", "other.token"}, dir.path());
  CHECK(refused.exit_code == 1);
  CHECK(refused.err.find("token did not match") != std::string::npos);
  CHECK(run.running());
  CHECK(run.wait_until([&] { return read_file(dir / "train.err").find("refused a connection") != std::string::npos; },
                       10s));
  // A run started without an admin token: no console steers it.
  auto steer = run_abg({"console", address, "--exec", "pause", "--admin", "--admin-token-file", "other.token"}, dir.path());
  CHECK(steer.exit_code == 1);
  CHECK(steer.err.find("this run has no admin token") != std::string::npos);

  // The run's token: private, in this user's runtime folder, gone with the run.
  auto runtime = abg::user_runtime_dir();
  REQUIRE(runtime);
  const auto token = *runtime / ("inspector-" + address.substr(address.rfind(':') + 1) + ".token");
  struct stat st{};
  REQUIRE(::stat(token.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  run.signal(SIGINT);
  REQUIRE(run.wait_for(30s));
  CHECK_FALSE(std::filesystem::exists(token));
}

TEST_CASE("--inspect none opens no port; a malformed --inspect is refused") {
  scratch_dir dir;
  import_kinship(dir.path());
  auto none = run_abg({"train", "kin.toml", "-p", "edge_paths=data/kin/train", "-p", "num_epochs=1", "--inspect",
                       "none"},
                      dir.path());
  CHECK(none.exit_code == 0);
  CHECK(none.err.find("inspector listening") == std::string::npos);
  auto bad = run_abg({"train", "kin.toml", "--inspect", "localhost"}, dir.path());
  CHECK(bad.exit_code == 1);
  CHECK(bad.err.find("give ADDRESS:PORT") != std::string::npos);
}

TEST_CASE("abg console attaches to a 2-node loopback cluster with the cluster's token") {
  kinship_cluster k(200);
  auto nodes = pbg_nodes(2);
  write_cluster_file(k.dir / "c.toml", nodes, 60, 60);
  // Held-out edges per bucket: the trainers view shows their MRR.
  const auto overrides = with(train_split, {"eval_fraction=0.05"});
  node_process a(k.dir.path(), "c.toml", "kin.toml", "a", overrides);
  node_process b(k.dir.path(), "c.toml", "kin.toml", "b", overrides);
  REQUIRE(a.wait_for("inspector listening on", 60s));
  const auto address = inspector_address(a.log());
  REQUIRE(a.process().wait_until([&] { return newest_version(k.dir / "model/kin") >= 1; }, 120s));
  // What a SIGKILLed single-process run that had this port left: its token
  // file, with no live process locking it. The console skips it and removes it.
  auto stale = abg::inspector_token_file(
    static_cast<std::uint16_t>(std::stoi(address.substr(address.rfind(':') + 1))));
  REQUIRE(stale);
  std::filesystem::remove(*stale);
  REQUIRE(abg::write_token_file(*stale));
  // Loopback, no token file named: the console takes this user's loopback token, as the nodes did.
  auto listed = view(k.dir.path(), address, "nodes");
  CHECK_FALSE(std::filesystem::exists(*stale));
  REQUIRE(listed["nodes"].size() == 2);
  for (const auto& n : listed["nodes"]) {
    CHECK(n["state"] == "alive");
    // Heard from within the heartbeat timeout (2.5 s), its memory reported.
    REQUIRE(n.contains("heard_seconds_ago"));
    CHECK(n["heard_seconds_ago"].get<double>() < 2.5);
    CHECK(n["rss_bytes"].get<std::uint64_t>() > 10'000'000);
  }
  // Swaps per iteration: once the coordinator has recorded iteration 0
  // (the version's files may be there a moment before).
  nlohmann::json buckets;
  for (int i = 0; i < 50 && (buckets.empty() || buckets["swaps_per_iteration"].empty()); ++i) {
    if (!buckets.empty()) std::this_thread::sleep_for(100ms);
    buckets = view(k.dir.path(), address, "buckets");
  }
  CHECK(buckets["total"] == 16);
  CHECK(buckets["nparts_lhs"] == 4);
  REQUIRE(buckets["grid"].size() == 4);
  CHECK(buckets["grid"][0].get<std::string>().size() == 4);
  INFO(buckets.dump());
  REQUIRE_FALSE(buckets["swaps_per_iteration"].empty());
  // Iteration 0 starts with nothing held: each of the 4 partitions is loaded at least once.
  CHECK(buckets["swaps_per_iteration"][0]["iteration"] == 0);
  CHECK(buckets["swaps_per_iteration"][0]["swaps"].get<int>() >= 4);
  // This iteration's swaps are its done buckets' loads; each bucket loads its two partitions at most.
  std::int64_t loaded = 0;
  for (const auto& row : buckets["buckets"]) {
    if (row["state"] != "done") continue;
    CHECK(row["partitions_loaded"].get<int>() <= 2);
    CHECK(row["lock_wait_seconds"].get<double>() >= 0);
    CHECK(row["fetch_seconds"].get<double>() >= 0);
    loaded += row["partitions_loaded"].get<std::int64_t>();
  }
  CHECK(buckets["swaps"].get<std::int64_t>() == loaded);
  // Trainers: each one's released buckets of this iteration with the time it
  // waited for the lock server, fetched partitions and trained, and the
  // loss and held-out MRR of each (looked at until both have released one).
  nlohmann::json trainers;
  auto both_released = [&] {
    for (const auto& t : trainers["trainers"])
      if (t["released"].empty()) return false;
    return true;
  };
  for (int i = 0; i < 50 && (trainers.empty() || !both_released()); ++i) {
    if (!trainers.empty()) std::this_thread::sleep_for(50ms);
    trainers = view(k.dir.path(), address, "trainers");
  }
  INFO(trainers.dump());
  REQUIRE(trainers["trainers"].size() == 2);
  CHECK(trainers["trainers"][0]["node"] == "a");
  CHECK(trainers["trainers"][1]["node"] == "b");
  REQUIRE(both_released());
  for (const auto& t : trainers["trainers"]) {
    double waited = 0, fetched = 0;
    for (const auto& r : t["released"]) {
      CHECK(r["trainer"] == t["trainer"]);
      REQUIRE(r.contains("mrr_after")); // 5% of a bucket of Kinship: some edges are always held out
      CHECK(r["held_out_edges"].get<int>() > 0);
      CHECK(r["mrr_after"].get<double>() > 0);
      CHECK(r["mrr_after"].get<double>() <= 1);
      CHECK(r["loss_per_edge"].get<double>() > 0);
      waited += r["lock_wait_seconds"].get<double>();
      fetched += r["fetch_seconds"].get<double>();
    }
    // Asking the lock server is a round trip (over TCP for b): never free.
    CHECK(t["lock_wait_seconds"].get<double>() > 0);
    CHECK(t["lock_wait_seconds"].get<double>() == doctest::Approx(waited));
    CHECK(t["fetch_seconds"].get<double>() == doctest::Approx(fetched));
    CHECK(t["kernel_seconds"].get<double>() > 0);
    // The run's totals hold this iteration's.
    CHECK(t["run_lock_wait_seconds"].get<double>() >= t["lock_wait_seconds"].get<double>() * 0.999);
    CHECK(t["run_kernel_seconds"].get<double>() >= t["kernel_seconds"].get<double>() * 0.999);
    CHECK(t["run_partitions_loaded"].get<std::int64_t>() >= t["partitions_loaded"].get<std::int64_t>());
    REQUIRE(t.contains("mrr_after"));
    if (t["state"] == "training") CHECK(t["bucket_seconds"].get<double>() >= 0);
  }
  // The text view's per-bucket table needs a released bucket in the newest
  // iteration: an iteration may have just begun when it is asked.
  auto trainers_text = run_abg({"console", address, "--exec", "trainers"}, k.dir.path());
  for (int i = 0; i < 50 && trainers_text.out.find("mrr before") == std::string::npos; ++i) {
    std::this_thread::sleep_for(50ms);
    trainers_text = run_abg({"console", address, "--exec", "trainers"}, k.dir.path());
  }
  CHECK(trainers_text.out.find("mrr before") != std::string::npos);
  CHECK(trainers_text.out.find("locks s") != std::string::npos);
  // Traffic: both nodes sent swaps and control; each pair's bytes are what
  // the other node received from it, within what it sent in all (the nodes
  // answer one after the other while the run goes on: a sender's count may be
  // a moment older than its receiver's, hence the slack of a few messages).
  auto traffic = view(k.dir.path(), address, "traffic");
  REQUIRE(traffic["nodes"].size() == 2);
  for (const auto& n : traffic["nodes"]) {
    CHECK(n["sent"]["swaps"].get<std::uint64_t>() > 0);
    CHECK(n["sent"]["control"].get<std::uint64_t>() > 0);
    // Swaps went as bulk-channel messages: a request or a reply and each chunk's header.
    CHECK(n["sent_messages"]["swaps"].get<std::uint64_t>() > 0);
    CHECK(n["received_messages"]["swaps"].get<std::uint64_t>() > 0);
    CHECK(n["sent_messages"]["control"].get<std::uint64_t>() > 0);
    CHECK(n["sent"]["total"].get<std::uint64_t>() >= n["iteration_sent"]["total"].get<std::uint64_t>());
  }
  REQUIRE(traffic["pairs"].size() == 2);
  for (const auto& p : traffic["pairs"]) {
    const auto from = p["from"] == "a" ? 0 : 1;
    CHECK(p["to"] == (from == 0 ? "b" : "a"));
    CHECK(p["bytes"].get<std::uint64_t>() > 0);
    // Messages both ways (BASP's and the bulk channels'), a lock request and its answer at least per bucket.
    CHECK(p["messages"].get<std::uint64_t>() > 16);
    CHECK(p["bytes"].get<std::uint64_t>() <= traffic["nodes"][from]["sent"]["total"].get<std::uint64_t>() * 21 / 20 + 65536);
  }
  // CAF's messages by role pair: b's trainer asks a's lock server for
  // buckets and gets answers (at least one of each per bucket it trained by
  // the trainers view above; how many of an iteration's 16 buckets b gets
  // varies), a's coordinator sets up and asks b's trainer, b's node forwards
  // its log lines to a's coordinator; each counted once.
  auto role_pair = [&](const std::string& from, const std::string& from_role, const std::string& to,
                       const std::string& to_role) -> std::uint64_t {
    std::uint64_t n = 0, found = 0;
    for (const auto& r : traffic["role_pairs"])
      if (r["from"] == from && r["from_role"] == from_role && r["to"] == to && r["to_role"] == to_role) {
        n += r["messages"].get<std::uint64_t>();
        CHECK(r["bytes"].get<std::uint64_t>() >= 32 * r["messages"].get<std::uint64_t>()); // a BASP header each
        ++found;
      }
    CHECK(found <= 1);
    return n;
  };
  INFO(traffic["role_pairs"].dump());
  const auto b_buckets = trainers["trainers"][1]["buckets_trained"].get<std::uint64_t>();
  CHECK(b_buckets > 0);
  CHECK(role_pair("b", "trainer", "a", "lock_server") >= b_buckets);
  CHECK(role_pair("a", "lock_server", "b", "trainer") >= b_buckets);
  CHECK(role_pair("a", "coordinator", "b", "trainer") > 0);
  CHECK(role_pair("b", "node", "a", "coordinator") > 0);
  CHECK(role_pair("a", "caf", "b", "caf") > 0); // BASP's handshakes and heartbeats
  // Requests and answers pair up: b's trainer's and a's lock server's counts are a few messages apart at most.
  const auto asked = role_pair("b", "trainer", "a", "lock_server"), answered = role_pair("a", "lock_server", "b", "trainer");
  CHECK(asked + 8 >= answered);
  CHECK(answered + 8 >= asked);
  // Without a terminal the coordinator's node prints a line per bucket
  // (edges/s, loss, ETA) and, after each iteration, a table of the trainers.
  const auto log = a.log();
  INFO(log.substr(0, 4000));
  CHECK(std::regex_search(log, std::regex(R"(\[a\] iteration 1/200 bucket \([0-3], [0-3]\) trainer [01]: [0-9]+ edges, )"
                                          R"([0-9.k]+ edges/s, loss [0-9.]+; [0-9]+ of 16 buckets, ETA [0-9]+ (s|min)\n)")));
  CHECK(std::regex_search(log, std::regex(R"(\[a\]   trainer  buckets +edges +edges/s +loss/edge\n)"
                                          R"(\[a\] +0 +[0-9]+ +[0-9]+ +[0-9.k]+ +[0-9.]+\n)"
                                          R"(\[a\] +1 +[0-9]+ +[0-9]+ +[0-9.k]+ +[0-9.]+\n)")));
  // What each node holds: the partitions its server stores and its trainer
  // holds, and its parameters (its shard and its trainer's shared ones).
  auto held = view(k.dir.path(), address, "nodes");
  for (const auto& n : held["nodes"]) {
    INFO(n.dump());
    CHECK(n["partition_bytes"].get<std::uint64_t>() > 0);
    CHECK(n["parameter_bytes"].get<std::uint64_t>() > 0);
  }
  // Kinship's 104 entities in 4 partitions of 26 rows, 64 floats and an Adagrad float each.
  auto parts = view(k.dir.path(), address, "partitions");
  REQUIRE(parts["partitions"].size() == 4);
  for (const auto& p : parts["partitions"]) {
    INFO(p.dump());
    CHECK(p["entity"] == "all");
    CHECK(p["rows"] == 26);
    CHECK(p["bytes"] == 26 * 65 * 4);
    CHECK(p["stored_on"].size() + p["held_by"].size() >= 1);
  }
  // Two trainers share their parameters through a shard on each node.
  auto params = view(k.dir.path(), address, "params");
  REQUIRE(params["shards"].size() == 2);
  std::uint64_t pushes = 0;
  for (const auto& sh : params["shards"]) pushes += sh["pushes"].get<std::uint64_t>();
  CHECK(pushes > 0);
  // The run's log at the coordinator: its tail, a's bucket lines among
  // b's (both nodes log each bucket's held-out evaluation; the file's lines
  // of both are checked below), each line naming its node.
  auto logged = view(k.dir.path(), address, "log");
  CHECK(logged["file"] == (std::filesystem::path("model/kin") / "run.log").string());
  REQUIRE_FALSE(logged["lines"].empty());
  bool a_logged = false;
  for (const auto& l : logged["lines"]) {
    const auto node = l["node"].get<std::string>();
    CHECK((node == "a" || node == "b"));
    CHECK(l["line"].get<std::string>().find(" " + node + ": ") != std::string::npos);
    a_logged |= node == "a";
  }
  CHECK(a_logged);
  auto text = run_abg({"console", address, "--exec", "partitions"}, k.dir.path());
  CHECK(text.out.find("stored on (version)") != std::string::npos);
  // Consoles came and went; the run is unharmed.
  CHECK(a.process().running());
  CHECK(b.process().running());
  // A node killed: shown as lost within the heartbeat timeout (2.5 s).
  const auto killed = std::chrono::steady_clock::now();
  b.process().signal(SIGKILL);
  std::string state;
  double seconds = 0;
  for (int i = 0; i < 40 && state != "lost"; ++i) {
    auto now = view(k.dir.path(), address, "nodes");
    state = now["nodes"][1]["state"].get<std::string>();
    seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - killed).count();
    if (state != "lost") std::this_thread::sleep_for(100ms);
  }
  CHECK(state == "lost");
  CHECK(seconds <= 2.5);
  // SIGINT to the coordinator's node stops the cluster (docs/cluster.md).
  a.process().signal(SIGINT);
  CHECK(a.process().wait_for(60s).has_value());
  CHECK(b.process().wait_for(60s).has_value());
  // The run's log: both nodes' lines, each with its node and time, in time order.
  const auto run_log = read_file(k.dir / "model/kin/run.log");
  std::istringstream in(run_log);
  std::string line, last;
  std::set<std::string> nodes_seen;
  bool ordered = true;
  std::size_t count = 0;
  const std::regex shape(R"(^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z) ([ab]): .+$)");
  while (std::getline(in, line)) {
    std::smatch m;
    INFO(line);
    REQUIRE(std::regex_match(line, m, shape));
    ordered = ordered && m[1].str() >= last;
    last = m[1].str();
    nodes_seen.insert(m[2].str());
    ++count;
  }
  CHECK(ordered);
  CHECK(nodes_seen == std::set<std::string>{"a", "b"});
  CHECK(count > 20);
  CHECK(run_log.find("a: bucket (") != std::string::npos);
  CHECK(run_log.find("b: node b: joined the cluster") != std::string::npos);
}
