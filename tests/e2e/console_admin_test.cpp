// `abg console --admin` steering a live run (docs/console.md, "Steering a
// run"): Kinship in 4 partitions on 2 simulated machines, whose second
// trainer waits hogwild_delay before each bucket of the first epoch, so
// that epoch lasts seconds with buckets done and a bucket in training.
// Without --admin, or with another admin token, nothing steers it; pause
// stops handing out buckets and resume goes on; checkpoint commits mid-
// iteration, listing the buckets done; stop commits and ends the run with
// status 0; a run resumed from a mid-iteration version trains the others;
// a node lost while the run stops ends the run instead of being waited for.
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include <sys/wait.h>

#include <nlohmann/json.hpp>

#include "tests/e2e/checkpoints.h"
#include "tests/e2e/cli.h"
#include "tests/e2e/inspector_address.h"
#include "tests/e2e/kinship_cluster.h"
#include "tests/test_util.h"

using namespace std::chrono_literals;
using namespace abg::test;

namespace {

const std::vector<std::string> slow_first_epoch{"train", "kin.toml", "-p", "edge_paths=data/kin/train", "-p",
                                                "num_machines=2", "-p", "hogwild_delay=2", "-p", "seed=5",
                                                "--admin-token-file", "admin.token"};

nlohmann::json json_of(const cli_result& r) {
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  auto doc = nlohmann::json::parse(r.out, nullptr, false);
  REQUIRE_FALSE(doc.is_discarded());
  return doc;
}

cli_result admin(const std::filesystem::path& dir, const std::string& address, const std::string& command) {
  return run_abg({"console", address, "--admin", "--admin-token-file", "admin.token", "--exec", command}, dir);
}

nlohmann::json manifest(const std::filesystem::path& model, std::int64_t version) {
  std::ifstream in(model / fmt::format("v{}", version) / "manifest.json");
  auto doc = nlohmann::json::parse(in, nullptr, false);
  REQUIRE_FALSE(doc.is_discarded());
  return doc;
}

// Started with the slow first epoch; returns the inspector's address once a
// bucket of iteration 0 is done and another is being trained.
std::string started_mid_epoch(abg_process& run, const std::filesystem::path& dir) {
  std::string address;
  REQUIRE(run.wait_until([&] { return !(address = inspector_address(read_file(dir / "train.err"))).empty(); }, 60s));
  bool mid = false;
  for (int i = 0; i < 200 && !mid && run.running(); ++i) {
    auto b = json_of(run_abg({"console", address, "--exec", "buckets", "--json"}, dir));
    mid = b["iteration"] == 0 && b["done"].get<int>() >= 1 && b["training"].get<int>() >= 1;
    if (!mid) std::this_thread::sleep_for(50ms);
  }
  INFO(read_file(dir / "train.err"));
  REQUIRE(mid);
  return address;
}

} // namespace

TEST_CASE("abg console --admin: refused without it or with another token; pause, resume, checkpoint mid-iteration, "
          "stop") {
  scratch_dir dir;
  // Long enough that the run is still training when stop comes (epochs
  // after the first take milliseconds each).
  import_kinship(dir.path(), kinship4(300));
  REQUIRE(run_abg({"cluster", "token", "admin.token"}, dir.path()).exit_code == 0);
  REQUIRE(run_abg({"cluster", "token", "other.token"}, dir.path()).exit_code == 0);
  abg_process run(slow_first_epoch, dir.path(), dir / "train.err");
  REQUIRE(run.started());
  const auto address = started_mid_epoch(run, dir.path());
  const auto model = dir / "model/kin";

  // A bucket in training shows since when (as the header's seconds) and for how long.
  {
    auto b = json_of(run_abg({"console", address, "--exec", "buckets", "--json"}, dir.path()));
    INFO(b.dump());
    int training = 0;
    for (const auto& row : b["buckets"]) {
      if (row["state"] != "training") continue;
      ++training;
      CHECK(row["for_seconds"].get<double>() >= 0);
      CHECK(row["since_seconds"].get<double>() + row["for_seconds"].get<double>() ==
            doctest::Approx(b["seconds"].get<double>()).epsilon(0.05));
    }
    CHECK(training == b["training"].get<int>());
  }

  // Read-only without --admin; another admin token is refused and logged.
  auto plain = run_abg({"console", address, "--exec", "pause"}, dir.path());
  CHECK(plain.exit_code == 1);
  CHECK(plain.err.find("attach with --admin") != std::string::npos);
  auto other = run_abg({"console", address, "--admin", "--admin-token-file", "other.token", "--exec", "pause"},
                       dir.path());
  CHECK(other.exit_code == 1);
  CHECK(other.err.find("the admin token did not match") != std::string::npos);
  CHECK(run.wait_until([&] { return read_file(dir / "train.err").find("refused an admin command") != std::string::npos; },
                       10s));
  CHECK(json_of(run_abg({"console", address, "--exec", "buckets", "--json"}, dir.path()))["paused"] == false);

  // Commit now: the trainers finish their buckets and write them back, and
  // the version lists this iteration's buckets done; no stats line yet.
  auto committed = admin(dir.path(), address, "checkpoint");
  INFO(committed.err);
  REQUIRE(committed.exit_code == 0);
  CHECK(committed.out.find("committed checkpoint version 1 mid-iteration 1") != std::string::npos);
  auto m = manifest(model, 1);
  const auto done = m["position"]["buckets_done"].size();
  CHECK(done >= 1);
  CHECK(done < 16);
  CHECK(m["position"]["epoch_complete"] == false);
  CHECK(training_stats(model).empty());
  CHECK(check_loadable(model, dir / "data/kin") == 1);

  // Paused: nothing is handed out; what was being trained finishes.
  auto paused = admin(dir.path(), address, "pause");
  CHECK(paused.exit_code == 0);
  CHECK(paused.out.find("paused") != std::string::npos);
  std::this_thread::sleep_for(2500ms); // the bucket being trained (hogwild_delay 2 s) is released meanwhile
  auto before = json_of(run_abg({"console", address, "--exec", "buckets", "--json"}, dir.path()));
  const auto version = newest_version(model);
  std::this_thread::sleep_for(1500ms);
  auto after = json_of(run_abg({"console", address, "--exec", "buckets", "--json"}, dir.path()));
  CHECK(after["paused"] == true);
  CHECK(run_abg({"console", address, "--exec", "buckets"}, dir.path()).out.find("paused by an admin console") !=
        std::string::npos);
  CHECK(after["iteration"] == before["iteration"]);
  CHECK(after["done"] == before["done"]);
  CHECK(after["training"] == 0);
  CHECK(newest_version(model) == version);

  // Resumed: buckets again, iterations committed.
  CHECK(admin(dir.path(), address, "resume").exit_code == 0);
  REQUIRE(run.wait_until([&] { return newest_version(model) > version; }, 60s));

  // Stop: committed, then every process exits 0 saying so.
  auto stopping = admin(dir.path(), address, "stop");
  INFO(stopping.err);
  INFO(stopping.out);
  CHECK(stopping.exit_code == 0);
  CHECK(stopping.out.find("stopping") != std::string::npos);
  auto status = run.wait_for(60s);
  REQUIRE(status);
  const auto log = read_file(dir / "train.err");
  INFO(log);
  CHECK(WIFEXITED(*status));
  CHECK(WEXITSTATUS(*status) == 0);
  CHECK(log.find("stopped by an admin console after") != std::string::npos);
  check_only_committed(model);
  // Started again, it resumes there and finishes: one stats line per iteration.
  auto again = run_abg({"train", "kin.toml", "-p", "edge_paths=data/kin/train", "-p", "num_machines=2"}, dir.path());
  INFO(again.err);
  CHECK(again.exit_code == 0);
  CHECK(again.err.find("resuming from checkpoint version") != std::string::npos);
  CHECK(training_stats(model).size() == 300);
}

TEST_CASE("a lost trainer's buckets show as re-queued in the grid until another trainer takes them") {
  // Two nodes; b (rank 1) waits hogwild_delay (2 s) before each bucket of
  // the first epoch, its bucket in hand. The run is paused just after b got
  // a bucket, and b is killed before it is done with it: once b is declared
  // lost its bucket is re-queued, and stays so while nothing is handed out.
  kinship_cluster k(2);
  REQUIRE(run_abg({"cluster", "token", "admin.token"}, k.dir.path()).exit_code == 0);
  // b only trains: a lost partition server would roll the iteration back instead.
  auto nodes = nodes_of({"trainer", "partition_server", "parameter_server"}, {{"trainer"}});
  write_cluster_file(k.dir / "c.toml", nodes);
  auto text = read_file(k.dir / "c.toml");
  text.insert(text.find("\n") + 1, "admin_token_file = \"admin.token\"\n");
  write_text(k.dir / "c.toml", text);
  const auto overrides = with(train_split, {"hogwild_delay=2"});
  node_process a(k.dir.path(), "c.toml", "kin.toml", "a", overrides);
  node_process b(k.dir.path(), "c.toml", "kin.toml", "b", overrides);
  REQUIRE(a.wait_for("inspector listening on", 60s));
  const auto address = inspector_address(a.log());
  auto buckets = [&] { return json_of(run_abg({"console", address, "--exec", "buckets", "--json"}, k.dir.path())); };
  // b has had its bucket for less than a second.
  bool b_started = false;
  for (int i = 0; i < 300 && !b_started && a.process().running(); ++i) {
    auto now = buckets();
    for (const auto& row : now["buckets"])
      b_started |= now["iteration"] == 0 && row["state"] == "training" && row["trainer"] == 1 &&
                   row["for_seconds"].get<double>() < 1.0;
    if (!b_started) std::this_thread::sleep_for(20ms);
  }
  INFO(a.log());
  REQUIRE(b_started);
  REQUIRE(admin(k.dir.path(), address, "pause").exit_code == 0);
  b.process().signal(SIGKILL);
  nlohmann::json lost;
  for (int i = 0; i < 200 && (lost.empty() || lost["requeued"] == 0); ++i) {
    if (!lost.empty()) std::this_thread::sleep_for(50ms);
    lost = buckets();
  }
  INFO(lost.dump());
  REQUIRE(lost["requeued"].get<int>() >= 1);
  int shown = 0;
  for (const auto& row : lost["buckets"]) shown += row["state"] == "re-queued";
  CHECK(shown == lost["requeued"].get<int>());
  std::string grid;
  for (const auto& line : lost["grid"]) grid += line.get<std::string>();
  CHECK(std::count(grid.begin(), grid.end(), 'R') == shown);
  CHECK(lost["done"].get<int>() + lost["training"].get<int>() + shown + lost["waiting"].get<int>() == 16);
  auto drawn = run_abg({"console", address, "--exec", "buckets"}, k.dir.path());
  CHECK(drawn.out.find(fmt::format("{} re-queued", shown)) != std::string::npos);
  // Resumed: a trains them; the iteration completes without b.
  REQUIRE(admin(k.dir.path(), address, "resume").exit_code == 0);
  CHECK(a.process().wait_until([&] { return newest_version(k.dir / "model/kin") >= 1; }, 120s));
  a.process().signal(SIGINT);
  CHECK(a.process().wait_for(60s).has_value());
}

TEST_CASE("a run resumed from a version committed mid-iteration trains only the buckets it lacks") {
  scratch_dir dir;
  import_kinship(dir.path(), kinship4(2));
  REQUIRE(run_abg({"cluster", "token", "admin.token"}, dir.path()).exit_code == 0);
  abg_process run(slow_first_epoch, dir.path(), dir / "train.err");
  REQUIRE(run.started());
  const auto address = started_mid_epoch(run, dir.path());
  auto committed = admin(dir.path(), address, "checkpoint");
  INFO(committed.err);
  REQUIRE(committed.exit_code == 0);
  run.signal(SIGKILL);
  REQUIRE(run.wait_for(30s));
  const auto model = dir / "model/kin";
  REQUIRE(newest_version(model) == 1);
  const auto done = manifest(model, 1)["position"]["buckets_done"].size();
  REQUIRE(done >= 1);
  auto again = run_abg({"train", "kin.toml", "-p", "edge_paths=data/kin/train", "-p", "num_machines=2"}, dir.path());
  INFO(again.err);
  REQUIRE(again.exit_code == 0);
  CHECK(again.err.find(fmt::format("and {} of 16 buckets of the next", done)) != std::string::npos);
  auto stats = training_stats(model);
  REQUIRE(stats.size() == 2);
  // Iteration 0 finished in the resumed run with the buckets the version lacked only.
  CHECK(stats[0]["epoch"] == 0);
  CHECK(stats[0]["edges"].get<std::int64_t>() > 0);
  CHECK(stats[0]["edges"].get<std::int64_t>() < 8548);
  CHECK(stats[1]["edges"].get<std::int64_t>() == 8548);
}

// `abg cluster up` forwards SIGINT to every node, so a node may go while the
// coordinator commits. Made certain here: a paused run, node b frozen, a
// checkpoint that waits on b, SIGINT to the coordinator, then b declared
// lost. The run ends there, its last commit the resume point, instead of
// rolling back and waiting for b to come back.
TEST_CASE("a node lost while the run stops ends the run; nothing waits for it to come back") {
  kinship_cluster k(400);
  REQUIRE(run_abg({"cluster", "token", "admin.token"}, k.dir.path()).exit_code == 0);
  write_cluster_file(k.dir / "c.toml", pbg_nodes(2));
  // Time for the stop to arrive before b is declared lost.
  auto cluster = read_file(k.dir / "c.toml");
  cluster.replace(cluster.find("heartbeat_timeout = 2.5"), 23, "heartbeat_timeout = 8");
  write_text(k.dir / "c.toml", cluster);
  node_process a(k.dir.path(), "c.toml", "kin.toml", "a", train_split, "", {"--admin-token-file", "admin.token"});
  node_process b(k.dir.path(), "c.toml", "kin.toml", "b", train_split);
  REQUIRE(a.wait_for("checkpoint version 2"));
  const auto address = inspector_address(a.log());
  REQUIRE_FALSE(address.empty());
  // Paused with some of the iteration's buckets done and none in training,
  // so that a checkpoint goes straight to its commit.
  bool ready = false;
  for (int i = 0; i < 20 && !ready; ++i) {
    REQUIRE(admin(k.dir.path(), address, "pause").exit_code == 0);
    for (int j = 0; j < 100; ++j) {
      auto grid = json_of(run_abg({"console", address, "--exec", "buckets", "--json"}, k.dir.path()));
      if (grid["training"].get<int>() > 0) {
        std::this_thread::sleep_for(50ms);
        continue;
      }
      ready = grid["done"].get<int>() >= 1 && grid["done"].get<int>() < 16;
      break;
    }
    if (!ready) REQUIRE(admin(k.dir.path(), address, "resume").exit_code == 0);
  }
  REQUIRE(ready);
  std::this_thread::sleep_for(1s); // the paused trainers' write-backs
  b.process().signal(SIGSTOP);
  abg_process checkpoint({"console", address, "--admin", "--admin-token-file", "admin.token", "--exec", "checkpoint"},
                         k.dir.path(), k.dir / "checkpoint.err");
  std::this_thread::sleep_for(2s); // its commit now waits on b
  a.process().signal(SIGINT);
  INFO(a.log());
  CHECK(a.wait_for("while stopping: the last committed checkpoint", 60s));
  CHECK(a.exit_code(std::chrono::seconds(30)) == 128 + SIGINT); // as abg train stopped by a signal
  CHECK_FALSE(a.says("once it is back"));
  b.process().signal(SIGKILL);
}
