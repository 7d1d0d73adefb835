// Clusters of separate `abg node` processes on loopback, on Kinship split
// into 4 partitions: the same quality as one process with 2 and 4 nodes,
// PBG's --rank launch (tcp:// and file://), a checkpoint of 2 nodes resumed
// on 1 and on 4, and what a lost node costs: a frozen node declared lost, a
// killed trainer's bucket re-queued while the epoch completes and the node
// rejoining, a lost partition server rolled back, a lost coordinator ending
// every node, all resumable; a node without the data fetching the
// coordinator's at join, and one with other data refused with --no-fetch-data;
// the pre-flight check (`abg cluster check`); 2 nodes with a partition
// buffer reading their reserved buckets ahead; two nodes in two network
// namespaces over a veth shaped to 1 Gbit/s, as on two machines.
#include <doctest/doctest.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <regex>

#include "abg/storage/checkpoint.h"
#include "tests/e2e/checkpoints.h"
#include "tests/e2e/kinship_cluster.h"
#include "tests/e2e/netns.h"

using namespace abg::test;
using namespace std::chrono_literals;

namespace {

// "buckets trained per trainer: trainer 0: 9, trainer 1: 7" -> {9, 7}
std::vector<int> buckets_per_trainer(const std::string& log) {
  std::vector<int> out;
  auto at = log.find("buckets trained per trainer:");
  if (at == std::string::npos) return out;
  auto line = log.substr(at, log.find('\n', at) - at);
  std::regex one("trainer [0-9]+: ([0-9]+)");
  for (auto it = std::sregex_iterator(line.begin(), line.end(), one); it != std::sregex_iterator(); ++it)
    out.push_back(std::stoi((*it)[1]));
  return out;
}

}  // namespace

TEST_CASE("2 and 4 nodes as processes train Kinship to the quality of one process") {
  kinship_cluster k(20);
  // One process: one machine, and the same machines simulated. With several
  // machines each keeps its own Adagrad state for the shared parameters (as
  // PBG does), which on Kinship's relation operators is worth 0 to +0.045:
  // how much depends on how evenly the trainers happened to share the buckets
  // (0.733 to 0.775 for 2 simulated machines over random partitions; 0.730
  // and 0.735 over the seeded import's), so the several-machine runs are
  // held to the issue's bar, never more than 0.02 below one machine, and not
  // to each other.
  auto one_process = [&](int machines) {
    auto model = fmt::format("model/one{}", machines);
    auto r = run_abg({"train", "kin.toml", "-p", "edge_paths=data/kin/train", "-p", "checkpoint_path=" + model, "-p",
                      fmt::format("num_machines={}", machines)},
                     k.dir.path());
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    return k.mrr(model);
  };
  const double single = one_process(1);
  for (int machines : {2, 4}) {
    CAPTURE(machines);
    const double simulated = one_process(machines);
    auto nodes = pbg_nodes(machines);
    auto file = fmt::format("cluster{}.toml", machines);
    write_cluster_file(k.dir / file, nodes);
    auto model = fmt::format("model/n{}", machines);
    auto codes = k.run_all(file, nodes, with(train_split, {"checkpoint_path=" + model}));
    for (int c : codes) CHECK(c == 0);
    auto log = read_file(k.dir / "a.log");
    CHECK(log.find(fmt::format("all {} node(s) joined", machines)) != std::string::npos);
    // Every trainer did its share.
    auto shares = buckets_per_trainer(log);
    REQUIRE(shares.size() == static_cast<std::size_t>(machines));
    int total = 0;
    for (int s : shares) {
      CHECK(s > 0);
      total += s;
    }
    CHECK(total == 20 * 16);
    CHECK(abg::storage::committed_checkpoint_versions(k.dir / model).back() == 20);
    const double mrr = k.mrr(model);
    MESSAGE("Kinship filtered MRR: one machine ", single, "; ", machines, " machines simulated in one process ",
            simulated, ", as ", machines, " processes ", mrr);
    CHECK(simulated >= single - 0.02);
    CHECK(mrr >= single - 0.02);
  }
}

// Several trainers with a partition buffer (docs/actors.md, "Reading ahead
// with several trainers"): each grant reserves the trainer's next bucket, so
// a node reads its next partitions ahead while its bucket trains.
// buffer_capacity = 4 is room for a bucket's 2 partitions and the reserved
// bucket's. With 4 partitions and 2 trainers the other trainer often holds
// what a next bucket would need (no reservation then), so only some loads
// are read ahead; the quality is that of the run in memory.
TEST_CASE("2 nodes with a partition buffer: each trainer reads its reserved next bucket ahead, and trains as well") {
  constexpr int epochs = 20;
  kinship_cluster k(epochs);
  auto in_memory = run_abg({"train", "kin.toml", "-p", "edge_paths=data/kin/train", "-p", "checkpoint_path=model/memory",
                            "-p", "num_machines=2"},
                           k.dir.path());
  INFO(in_memory.err);
  REQUIRE(in_memory.exit_code == 0);
  auto nodes = pbg_nodes(2);
  write_cluster_file(k.dir / "cluster.toml", nodes);
  auto codes = k.run_all("cluster.toml", nodes, with(train_split, {"checkpoint_path=model/buffer", "buffer_capacity=4"}));
  for (int c : codes) CHECK(c == 0);
  const auto log = read_file(k.dir / "a.log");
  INFO(log);
  // "N of M partition loads read ahead", on the epochs that read any.
  const std::regex line(R"(([0-9]+) of ([0-9]+) partition loads read ahead)");
  int ahead = 0, loads = 0;
  for (std::sregex_iterator m(log.begin(), log.end(), line), end; m != end; ++m) {
    ahead += std::stoi((*m)[1]);
    loads += std::stoi((*m)[2]);
  }
  MESSAGE(ahead, " partition loads read ahead over ", epochs, " epochs (", loads, " loads in those epochs)");
  CHECK(ahead > 0);
  CHECK(ahead <= loads);
  auto shares = buckets_per_trainer(log);
  REQUIRE(shares.size() == 2);
  CHECK(shares[0] + shares[1] == epochs * 16);
  CHECK(shares[0] > 0);
  CHECK(shares[1] > 0);
  CHECK(abg::storage::committed_checkpoint_versions(k.dir / "model/buffer").back() == epochs);
  const double memory = k.mrr("model/memory"), buffered = k.mrr("model/buffer");
  MESSAGE("Kinship filtered MRR after ", epochs, " epochs, 2 machines: in memory ", memory, ", 2 nodes with a buffer ", buffered);
  // The import is seeded (same partitions every run), but two trainers take
  // buckets in an order set by timing, so both figures vary from run to run.
  // After 10 epochs, with the partitions still drawn at random, the runs'
  // difference reached 0.039 (one CI run). After 20 epochs with seeded
  // partitions, over 6 runs here: in memory 0.729 to 0.737, with a buffer
  // 0.744 to 0.754. This check is coarse: that partitions come back intact is
  // checked by versions and checksums in the actor tests.
  CHECK(buffered >= memory - 0.03);
}

TEST_CASE("PBG's launch: abg train --rank R with tcp:// and file://") {
  kinship_cluster k(10);
  for (bool file : {false, true}) {
    CAPTURE(file);
    const auto port = free_port();
    const std::string method =
      file ? "distributed_init_method=file://" + (k.dir / "rendezvous").string()
           : fmt::format("distributed_init_method=tcp://127.0.0.1:{}", port);
    const std::string model = file ? "model/file" : "model/tcp";
    std::vector<std::unique_ptr<abg_process>> ranks;
    for (int r : {1, 0}) {  // rank 1 first: it waits for rank 0
      std::vector<std::string> args{"train", "kin.toml", "--rank", std::to_string(r), "-p", "num_machines=2", "-p",
                                    method, "-p", "edge_paths=data/kin/train", "-p", "checkpoint_path=" + model};
      if (file) args.insert(args.end(), {"--advertise", "127.0.0.1"});
      ranks.push_back(std::make_unique<abg_process>(args, k.dir.path(), k.dir / fmt::format("rank{}.log", r)));
    }
    for (auto& r : ranks) {
      auto st = r->wait_for(180s);
      REQUIRE(st);
      CHECK(WIFEXITED(*st));
      CHECK(WEXITSTATUS(*st) == 0);
    }
    auto log0 = read_file(k.dir / "rank0.log");
    INFO(log0);
    INFO(read_file(k.dir / "rank1.log"));
    CHECK(log0.find("all 2 node(s) joined") != std::string::npos);
    CHECK(buckets_per_trainer(log0).size() == 2);
    CHECK(k.mrr(model) > 0.5);
  }
  // A rank outside the layout is refused, naming the layout.
  auto bad = run_abg({"train", "kin.toml", "--rank", "5", "-p", "num_machines=2", "-p",
                      "distributed_init_method=tcp://127.0.0.1:1"},
                     k.dir.path());
  CHECK(bad.exit_code == 1);
  CHECK(bad.err.find("ranks 0 to 1") != std::string::npos);
}

TEST_CASE("a checkpoint written by 2 nodes resumes on 1 and on 4") {
  kinship_cluster k(12);
  auto two = pbg_nodes(2);
  write_cluster_file(k.dir / "two.toml", two);
  for (int c : k.run_all("two.toml", two, with(train_split, {"num_epochs=4"}))) CHECK(c == 0);
  CHECK(abg::storage::committed_checkpoint_versions(k.dir / "model/kin").back() == 4);
  auto one = run_abg({"train", "kin.toml", "-p", "edge_paths=data/kin/train", "-p", "num_epochs=8"}, k.dir.path());
  INFO(one.err);
  REQUIRE(one.exit_code == 0);
  CHECK(one.err.find("resumed at iteration 4") != std::string::npos);
  auto four = pbg_nodes(4);
  write_cluster_file(k.dir / "four.toml", four);
  for (int c : k.run_all("four.toml", four, train_split)) CHECK(c == 0);
  auto log = read_file(k.dir / "a.log");
  CHECK(log.find("resuming from checkpoint version 8") != std::string::npos);
  CHECK(abg::storage::committed_checkpoint_versions(k.dir / "model/kin").back() == 12);
  CHECK(k.mrr("model/kin") > 0.5);
  // With lr = 0 no embedding changes: what the servers on other nodes were
  // seeded with (sent from the checkpoint's mapped files) and what the commit
  // gathered back (written a chunk at a time) are the checkpoint's, bit for bit.
  auto embeddings = [&] {
    auto all = table_checksums(k.dir / "model/kin");
    std::erase_if(all, [](auto& f) { return !f.first.starts_with("tables/embeddings_"); });
    return all;
  };
  const auto before = embeddings();
  CHECK(before.size() == 4);
  for (int c : k.run_all("four.toml", four, with(train_split, {"num_epochs=13", "lr=0"}))) CHECK(c == 0);
  CHECK(abg::storage::committed_checkpoint_versions(k.dir / "model/kin").back() == 13);
  CHECK(embeddings() == before);
}

TEST_CASE("a frozen node is declared lost; after SIGCONT it exits saying so") {
  kinship_cluster k(400);
  // b trains only: losing it costs its bucket, not the run.
  auto nodes = nodes_of({"trainer", "partition_server", "parameter_server"}, {{"trainer"}});
  write_cluster_file(k.dir / "c.toml", nodes);
  node_process a(k.dir.path(), "c.toml", "kin.toml", "a", train_split);
  node_process b(k.dir.path(), "c.toml", "kin.toml", "b", train_split);
  REQUIRE(a.wait_for("all 2 node(s) joined"));
  REQUIRE(a.wait_for("checkpoint version 2"));
  b.process().signal(SIGSTOP);
  const auto stopped = std::chrono::steady_clock::now();
  REQUIRE(a.wait_for("node b (trainer) lost"));
  const auto noticed = std::chrono::steady_clock::now() - stopped;
  MESSAGE("frozen node declared lost after ", std::chrono::duration<double>(noticed).count(), " s");
  CHECK(noticed < 10s);  // heartbeat_timeout is 2.5 s
  b.process().signal(SIGCONT);
  CHECK(b.exit_code(60s) == 1);
  CHECK(b.says("lost the coordinator"));
  // The run goes on with a's trainer alone.
  REQUIRE(a.wait_for("checkpoint version 400", 300s));
  CHECK(a.exit_code() == 0);
}

TEST_CASE("a trainer node killed mid-bucket: bucket re-queued, the epoch completes, the node rejoins") {
  kinship_cluster k(300);
  auto nodes = nodes_of({"trainer", "partition_server", "parameter_server"}, {{"trainer"}});
  write_cluster_file(k.dir / "c.toml", nodes);
  // hogwild_delay: in the first epoch b holds each bucket 30 s before training it.
  auto overrides = with(train_split, {"hogwild_delay=30"});
  node_process a(k.dir.path(), "c.toml", "kin.toml", "a", overrides);
  auto b = std::make_unique<node_process>(k.dir.path(), "c.toml", "kin.toml", "b", overrides);
  REQUIRE(b->wait_for("waits hogwild_delay"));
  b->process().signal(SIGKILL);
  REQUIRE(a.wait_for("node b (trainer) lost"));
  REQUIRE(a.wait_for("bucket(s) ("));  // "trainer 1 (b) is gone; bucket(s) (i, j) re-queued"
  CHECK(a.says("trainer 1 (b) is gone; bucket(s)"));
  // The first epoch completes without b.
  REQUIRE(a.wait_for("checkpoint version 1"));
  b.reset();
  // Started again with the same command, b joins and trains buckets.
  node_process again(k.dir.path(), "c.toml", "kin.toml", "b", overrides, ".again");
  REQUIRE(a.wait_for("node b (trainer) joined again"));
  CHECK_MESSAGE(a.exit_code() == 0, a.log());
  CHECK_MESSAGE(again.exit_code() == 0, again.log());
  auto shares = buckets_per_trainer(a.log());
  REQUIRE(shares.size() == 2);
  CHECK(shares[1] > 0);
  CHECK(k.mrr("model/kin") > 0.5);
}

TEST_CASE("a lost partition server rolls the cluster back to the last commit, and the run completes") {
  kinship_cluster k(300);
  auto nodes = pbg_nodes(2);  // b: trainer, partition server, parameter-server shard
  write_cluster_file(k.dir / "c.toml", nodes, /*server_wait=*/60);
  node_process a(k.dir.path(), "c.toml", "kin.toml", "a", train_split);
  auto b = std::make_unique<node_process>(k.dir.path(), "c.toml", "kin.toml", "b", train_split);
  REQUIRE(a.wait_for("checkpoint version 3"));
  b->process().signal(SIGKILL);
  REQUIRE(a.wait_for("rolling back to checkpoint version"));
  b.reset();
  node_process again(k.dir.path(), "c.toml", "kin.toml", "b", train_split, ".again");
  CHECK(a.exit_code() == 0);
  CHECK(again.exit_code() == 0);
  CHECK(a.says("1 rollback(s) to the last commit"));
  CHECK(abg::storage::committed_checkpoint_versions(k.dir / "model/kin").back() == 300);
  CHECK(k.mrr("model/kin") > 0.5);
}

TEST_CASE("a partition server that does not come back: every node exits naming it; relaunching resumes") {
  kinship_cluster k(300);
  auto nodes = pbg_nodes(3);
  write_cluster_file(k.dir / "c.toml", nodes, /*server_wait=*/3);
  node_process a(k.dir.path(), "c.toml", "kin.toml", "a", train_split);
  node_process b(k.dir.path(), "c.toml", "kin.toml", "b", train_split);
  auto c = std::make_unique<node_process>(k.dir.path(), "c.toml", "kin.toml", "c", train_split);
  REQUIRE(a.wait_for("checkpoint version 2"));
  c->process().signal(SIGKILL);
  CHECK(a.exit_code(60s) == 1);
  CHECK(a.says("node c (trainer, partition_server, parameter_server) did not come back within 3 s"));
  CHECK(b.exit_code(60s) == 1);
  CHECK(b.says("did not come back"));
  c.reset();
  auto last = abg::storage::committed_checkpoint_versions(k.dir / "model/kin").back();
  // Relaunching every node resumes from the last commit.
  for (int code : k.run_all("c.toml", nodes, train_split)) CHECK(code == 0);
  CHECK(read_file(k.dir / "a.log").find(fmt::format("resuming from checkpoint version {}", last)) != std::string::npos);
}

TEST_CASE("the coordinator lost: every other node exits naming it; relaunching resumes") {
  kinship_cluster k(300);
  auto nodes = pbg_nodes(2);
  write_cluster_file(k.dir / "c.toml", nodes);
  auto a = std::make_unique<node_process>(k.dir.path(), "c.toml", "kin.toml", "a", train_split);
  node_process b(k.dir.path(), "c.toml", "kin.toml", "b", train_split);
  REQUIRE(a->wait_for("checkpoint version 2"));
  a->process().signal(SIGKILL);
  const auto killed = std::chrono::steady_clock::now();
  CHECK(b.exit_code(60s) == 1);
  CHECK(std::chrono::steady_clock::now() - killed < 15s);
  CHECK(b.says("lost the coordinator at 127.0.0.1:"));
  a.reset();
  auto last = abg::storage::committed_checkpoint_versions(k.dir / "model/kin").back();
  for (int code : k.run_all("c.toml", nodes, train_split)) CHECK(code == 0);
  CHECK(read_file(k.dir / "a.log").find(fmt::format("resuming from checkpoint version {}", last)) != std::string::npos);
}

TEST_CASE("a node that does not belong is refused, naming why") {
  kinship_cluster k(4);
  auto nodes = pbg_nodes(2);
  write_cluster_file(k.dir / "c.toml", nodes, 60, /*join_timeout=*/20);
  node_process a(k.dir.path(), "c.toml", "kin.toml", "a", train_split);
  // Another training config than the coordinator's.
  node_process b(k.dir.path(), "c.toml", "kin.toml", "b", with(train_split, {"lr=0.5"}));
  CHECK(b.exit_code(60s) == 1);
  CHECK(b.says("another training config than the coordinator"));
  // The coordinator is still waiting for a b that fits; then it gives up, naming it.
  CHECK(a.exit_code(60s) == 1);
  CHECK(a.says("node(s) b did not join within 20 s"));
}

TEST_CASE("a node without the data gets the coordinator's at join; with --no-fetch-data other data is refused") {
  namespace fs = std::filesystem;
  kinship_cluster k(2);
  auto nodes = pbg_nodes(2);
  write_cluster_file(k.dir / "c.toml", nodes, 60, /*join_timeout=*/30);
  // Node b works in a folder of its own that holds only the cluster file and the config.
  const auto bdir = k.dir / "b";
  fs::create_directories(bdir);
  fs::copy_file(k.dir / "c.toml", bdir / "c.toml");
  fs::copy_file(k.dir / "kin.toml", bdir / "kin.toml");
  {
    node_process a(k.dir.path(), "c.toml", "kin.toml", "a", train_split);
    node_process b(bdir, "c.toml", "kin.toml", "b", train_split);
    CHECK(b.exit_code() == 0);
    CHECK(a.exit_code() == 0);
    CHECK(b.says("data files"));
    CHECK(b.says("from the coordinator's node"));
    CHECK(buckets_per_trainer(a.log()).size() == 2);
  }
  // b's copy is now the coordinator's, file for file (the entity path and the trained edge path).
  std::size_t compared = 0;
  for (const auto* sub : {"data/kin/train", "data/kin"}) {
    for (auto& e : fs::directory_iterator(k.dir / sub)) {
      if (!e.is_regular_file() || e.path().filename().string().starts_with(".")) continue;
      auto theirs = bdir / sub / e.path().filename();
      REQUIRE_MESSAGE(fs::exists(theirs), theirs.string());
      CHECK(read_file(theirs) == read_file(e.path()));
      ++compared;
    }
  }
  CHECK(compared >= 16 + 2);  // 16 buckets and the manifest; entities.json and the names files
  // One bucket file of b's copy changed: with --no-fetch-data b is refused, naming it.
  const auto bucket = bdir / "data/kin/train/edges_1_2.abgb";
  auto bytes = read_file(bucket);
  REQUIRE(bytes.size() > 100);
  bytes[bytes.size() - 1] = static_cast<char>(bytes[bytes.size() - 1] ^ 0x5a);
  { std::ofstream(bucket, std::ios::binary | std::ios::trunc) << bytes; }
  const auto more = with(train_split, {"checkpoint_path=model/kin2"});
  {
    node_process a(k.dir.path(), "c.toml", "kin.toml", "a", more, "-2");
    node_process b(bdir, "c.toml", "kin.toml", "b", more, "-2", {"--no-fetch-data"});
    CHECK(b.exit_code(60s) == 1);
    CHECK(b.says("this node's data differs from the coordinator's: edges_1_2.abgb of edge_paths[0]"));
    CHECK(b.says("its checksum differs"));
    // Left as it was: nothing fetched.
    CHECK(read_file(bucket) == bytes);
  }
  // Without the flag it fetches that one file and trains.
  {
    node_process a(k.dir.path(), "c.toml", "kin.toml", "a", more, "-3");
    node_process b(bdir, "c.toml", "kin.toml", "b", more, "-3");
    CHECK(b.exit_code() == 0);
    CHECK(a.exit_code() == 0);
    CHECK(b.says("fetched 1 of "));
    CHECK(read_file(bucket) == read_file(k.dir / "data/kin/train/edges_1_2.abgb"));
  }
}

TEST_CASE("abg cluster check: every node joins and is checked, nothing is trained; a node with other data fails it") {
  namespace fs = std::filesystem;
  kinship_cluster k(2);
  auto nodes = pbg_nodes(3);
  write_cluster_file(k.dir / "c.toml", nodes, 60, /*join_timeout=*/60);
  {
    abg_process check({"cluster", "check", "c.toml", "kin.toml", "-p", "edge_paths=data/kin/train"}, k.dir.path(),
                      k.dir / "check.log");
    auto st = check.wait_for(120s);
    REQUIRE(st);
    const auto log = read_file(k.dir / "check.log");
    CHECK_MESSAGE(WIFEXITED(*st), log);
    CHECK_MESSAGE(WEXITSTATUS(*st) == 0, log);
    for (const auto* name : {"a", "b", "c"})
      CHECK(log.find(fmt::format("check node {}: memory: holds up to", name)) != std::string::npos);
    CHECK(log.find("check node b: reaches the 1 other node(s) besides the coordinator's: ok") != std::string::npos);
    for (const auto* name : {"a", "b", "c"})
      CHECK(log.find(fmt::format("check node {}: reaches the bulk channels of the 2 other partition server(s): ok",
                                 name)) != std::string::npos);
    CHECK(log.find("check host 127.0.0.1: nodes a, b, c together hold up to") != std::string::npos);
    CHECK(log.find("the cluster check passed") != std::string::npos);
    CHECK_FALSE(fs::exists(k.dir / "model/kin"));
  }
  // Node b in an empty folder: the check fails at once, naming the file, without
  // waiting for node c; nothing is fetched.
  const auto bdir = k.dir / "b";
  fs::create_directories(bdir);
  fs::copy_file(k.dir / "c.toml", bdir / "c.toml");
  fs::copy_file(k.dir / "kin.toml", bdir / "kin.toml");
  const auto started = std::chrono::steady_clock::now();
  node_process a(k.dir.path(), "c.toml", "kin.toml", "a", train_split, "-check", {"--check"});
  node_process b(bdir, "c.toml", "kin.toml", "b", train_split, "-check", {"--check"});
  CHECK(b.exit_code(60s) == 1);
  CHECK(b.says("this node's data differs from the coordinator's"));
  CHECK(a.exit_code(60s) == 1);
  CHECK(a.says("node b: this node's data differs from the coordinator's"));
  CHECK(std::chrono::steady_clock::now() - started < 40s);  // well before the join timeout
  CHECK_FALSE(fs::exists(bdir / "data"));
}

TEST_CASE("two nodes in two network namespaces, joined by a veth shaped to 1 Gbit/s, train Kinship") {
  netns_pair net("1gbit");
  if (!net.ok()) {
    MESSAGE("skipped: the network-namespace test cannot run here: " << net.why_not());
    return;
  }
  kinship_cluster k(6); // 4 epochs left the MRR at 0.498-0.55: too close to the bar
  auto nodes = pbg_nodes(2);
  for (int side = 0; side < 2; ++side) nodes[static_cast<std::size_t>(side)].host = net.address(side);
  // Beyond loopback a cluster needs a token file.
  REQUIRE(run_abg({"cluster", "token", "c.token"}, k.dir.path()).exit_code == 0);
  write_cluster_file(k.dir / "c.toml", nodes, 60, 60, "c.token");
  const auto started = std::chrono::steady_clock::now();
  {
    node_process a(k.dir.path(), "c.toml", "kin.toml", "a", train_split, "", {}, net.wrapper(0));
    node_process b(k.dir.path(), "c.toml", "kin.toml", "b", train_split, "", {}, net.wrapper(1));
    CHECK(b.exit_code() == 0);
    CHECK(a.exit_code() == 0);
    CHECK(b.says(fmt::format("joined the cluster (coordinator at {}:", net.address(0))));
    CHECK(buckets_per_trainer(a.log()).size() == 2);
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  CHECK(k.mrr("model/kin") > 0.5);
  // What each node counted as its traffic with the other, by purpose.
  auto counted = [&](const char* node) {
    const auto log = read_file(k.dir / (std::string(node) + ".log"));
    std::smatch m;
    static const std::regex line("traffic with the other nodes: sent ([0-9.]+) MB \\(swaps ([0-9.]+), checkpoints ([0-9.]+), "
                                 "parameters ([0-9.]+), control ([0-9.]+)\\), received ([0-9.]+) MB");
    REQUIRE_MESSAGE(std::regex_search(log, m, line), log);
    MESSAGE(m[0].str());
    std::vector<double> mb;
    for (std::size_t i = 1; i < m.size(); ++i) mb.push_back(std::stod(m[i].str()));
    return mb;
  };
  const auto na = counted("a"), nb = counted("b");
  // The partitions, parameters and control messages went over the veth: at
  // least every partition of node b's server crossed it once each way
  // (Kinship: 104 entities x 65 floats in 4 partitions, 2 of them on b).
  auto [rx_a, tx_a] = net.bytes(0);
  auto [rx_b, tx_b] = net.bytes(1);
  MESSAGE(fmt::format("2 nodes over a 1 Gbit/s veth: {:.1f} s; node a sent {} and received {} bytes, node b sent {} "
                      "and received {}",
                      seconds, tx_a, rx_a, tx_b, rx_b));
  CHECK(tx_a > 2 * 26 * 65 * 4);
  CHECK(tx_b > 2 * 26 * 65 * 4);
  // A veth pair: what one end sends the other receives, but the counters are
  // read one after the other, and a late packet (a FIN, an ACK) may fall
  // between the reads (CI saw 90 bytes).
  CHECK(rx_a <= tx_b);
  CHECK(tx_b - rx_a <= 3000);
  // The purposes add up to the total; the total is what the veth carried,
  // less the headers and acknowledgements of TCP/IP (a few percent here,
  // where small control messages are a large share).
  for (const auto* n : {&na, &nb}) {
    CHECK((*n)[0] == doctest::Approx((*n)[1] + (*n)[2] + (*n)[3] + (*n)[4]).epsilon(0.01));
    CHECK((*n)[1] > 0);  // partitions swapped between the nodes
    CHECK((*n)[2] > 0);  // the checkpoint gathered to node a, the servers seeded from it
  }
  CHECK(na[0] * 1e6 <= static_cast<double>(tx_a));
  CHECK(na[0] * 1e6 >= 0.8 * static_cast<double>(tx_a));
  CHECK(nb[0] * 1e6 <= static_cast<double>(tx_b));
  CHECK(nb[0] * 1e6 >= 0.8 * static_cast<double>(tx_b));
}
