// `--metrics` against a real Prometheus server (Debian's `prometheus`,
// started here on loopback, scraping every second): while `abg train`
// trains Kinship on 2 simulated machines, Prometheus' query API gives a
// non-zero rate of trained edges for each trainer. Also: the text format
// carries no entity names, and a malformed --metrics is refused.
#include <doctest/doctest.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <regex>
#include <set>
#include <string>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fmt/format.h>

#include "tests/e2e/cli.h"
#include "tests/e2e/cluster.h"
#include "tests/e2e/kinship.h"
#include "tests/test_util.h"

using namespace std::chrono_literals;
using namespace abg::test;

namespace {

// Runs a shell command in `dir`; its standard output.
std::string output_of(const std::filesystem::path& dir, const std::string& command) {
  const auto out = dir / ".command-stdout";
  std::string cmd = "cd ";
  cmd.append(shell_quote(dir.string())).append(" && ").append(command).append(" >").append(shell_quote(out.string()));
  cmd.append(" 2>&1");
  (void)std::system(cmd.c_str());
  auto text = read_file(out);
  std::filesystem::remove(out);
  return text;
}

// What 127.0.0.1:PORT/metrics answers (HTTP/1.0, read to the end, at most
// 5 s); empty when nothing does.
std::string scrape(std::uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return {};
  timeval limit{5, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string text;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) {
    const std::string get = "GET /metrics HTTP/1.0\r\n\r\n";
    if (::send(fd, get.data(), get.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(get.size())) {
      char buf[65536];
      for (ssize_t n; text.size() < (64u << 20) && (n = ::recv(fd, buf, sizeof buf, 0)) > 0;)
        text.append(buf, static_cast<std::size_t>(n));
    }
  }
  ::close(fd);
  return text;
}

} // namespace

TEST_CASE("--metrics: a Prometheus server scraping every second sees each trainer's rate of trained edges") {
  REQUIRE_MESSAGE(std::filesystem::exists("/usr/bin/prometheus"), "needs Debian's prometheus (tools/debian-packages.txt)");
  REQUIRE_MESSAGE(std::filesystem::exists("/usr/bin/promtool"), "needs Debian's prometheus (tools/debian-packages.txt)");
  scratch_dir dir;
  import_kinship(dir.path());
  const auto metrics_port = free_port();
  const auto prometheus_port = free_port();
  abg_process run({"train", "kin.toml", "-p", "edge_paths=data/kin/train", "-p", "num_epochs=100000", "-p",
                   "num_machines=2", "--metrics", fmt::format("127.0.0.1:{}", metrics_port)},
                  dir.path(), dir / "train.err");
  REQUIRE(run.wait_until([&] { return read_file(dir / "train.err").find("metrics on http://") != std::string::npos; },
                         60s));
  INFO(read_file(dir / "train.err"));
  write_text(dir / "prometheus.yml",
             fmt::format("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n"
                         "  - job_name: abg\n    static_configs:\n      - targets: ['127.0.0.1:{}']\n",
                         metrics_port));
  abg_process prometheus(abg_process::other_program{},
                         {"/usr/bin/prometheus", "--config.file=prometheus.yml", "--storage.tsdb.path=tsdb",
                          fmt::format("--web.listen-address=127.0.0.1:{}", prometheus_port)},
                         dir.path(), dir / "prometheus.err");
  // "{instance=..., job=abg, node=rank0, trainer=0} => 123456.7 @[...]", a line per trainer.
  const std::regex series(R"re(trainer="([01])"\} => ([0-9.e+]+) @)re");
  std::set<std::string> trainers;
  std::string answer;
  const auto deadline = std::chrono::steady_clock::now() + 90s;
  while (trainers.size() < 2 && std::chrono::steady_clock::now() < deadline && run.running() && prometheus.running()) {
    std::this_thread::sleep_for(1s);
    answer = output_of(dir.path(), fmt::format("/usr/bin/promtool query instant http://127.0.0.1:{} "
                                               "'rate(abg_trained_edges_total[5s])'",
                                               prometheus_port));
    trainers.clear();
    for (std::sregex_iterator it(answer.begin(), answer.end(), series), end; it != end; ++it)
      if (std::stod((*it)[2].str()) > 0) trainers.insert((*it)[1].str());
  }
  INFO("promtool: ", answer);
  INFO("prometheus: ", read_file(dir / "prometheus.err").substr(0, 3000));
  CHECK(trainers == std::set<std::string>{"0", "1"});
  // What it serves: counters and gauges of the run, no entity names.
  const auto text = output_of(dir.path(), fmt::format("/usr/bin/promtool query instant http://127.0.0.1:{} "
                                                      "'abg_node_up'",
                                                      prometheus_port));
  CHECK(text.find("node=\"rank0\"") != std::string::npos);
  CHECK(text.find("node=\"rank1\"") != std::string::npos);
  run.signal(SIGINT);
  CHECK(run.wait_for(60s).has_value());
  prometheus.signal(SIGTERM);
  CHECK(prometheus.wait_for(30s).has_value());
}

TEST_CASE("--metrics: a malformed address, port 0, or a node without the coordinator is refused") {
  scratch_dir dir;
  write_text(dir / "kin.toml", kinship_config);
  for (const char* bad : {"nowhere", "127.0.0.1:0", "127.0.0.1:99999"}) {
    auto r = run_abg({"train", "kin.toml", "--metrics", bad}, dir.path());
    INFO(bad, ": ", r.err);
    CHECK(r.exit_code != 0);
    const bool named = r.err.find("--metrics") != std::string::npos;
    CHECK(named);
  }
  auto nodes = pbg_nodes(2);
  write_cluster_file(dir / "c.toml", nodes);
  auto r = run_abg({"node", "c.toml", "kin.toml", "--name", "b", "--metrics", "127.0.0.1:9464"}, dir.path());
  CHECK(r.exit_code == 1);
  CHECK(r.err.find("this node does not host the coordinator") != std::string::npos);
}

TEST_CASE("abg cluster up --metrics: the coordinator's node serves the whole cluster's counters") {
  scratch_dir dir;
  import_kinship(dir.path());
  write_cluster_file(dir / "c.toml", pbg_nodes(2));
  // Refused before any node starts: port 0.
  auto bad = run_abg({"cluster", "up", "c.toml", "kin.toml", "--metrics", "127.0.0.1:0"}, dir.path());
  CHECK(bad.exit_code == 1);
  CHECK(bad.err.find("--metrics 127.0.0.1:0") != std::string::npos);
  CHECK(bad.err.find("[a]") == std::string::npos);
  const auto port = free_port();
  abg_process up({"cluster", "up", "c.toml", "kin.toml", "-p", "edge_paths=data/kin/train", "-p", "num_epochs=100000",
                  "--metrics", fmt::format("127.0.0.1:{}", port)},
                 dir.path(), dir / "up.err");
  // Both trainers' edges, from the endpoint of node a (it hosts the coordinator).
  const std::regex trained(R"re(abg_trained_edges_total\{[^}]*trainer="([01])"[^}]*\} ([0-9.e+]+))re");
  std::set<std::string> trainers;
  std::string text;
  const auto deadline = std::chrono::steady_clock::now() + 90s;
  while (trainers.size() < 2 && std::chrono::steady_clock::now() < deadline && up.running()) {
    std::this_thread::sleep_for(500ms);
    text = scrape(port);
    trainers.clear();
    for (std::sregex_iterator it(text.begin(), text.end(), trained), end; it != end; ++it)
      if (std::stod((*it)[2].str()) > 0) trainers.insert((*it)[1].str());
  }
  INFO(read_file(dir / "up.err").substr(0, 4000));
  INFO(text.substr(0, 4000));
  CHECK(trainers == std::set<std::string>{"0", "1"});
  CHECK(text.find("abg_node_up{node=\"b\"") != std::string::npos);
  CHECK(read_file(dir / "up.err").find("[a] node a: metrics on http://127.0.0.1:" + std::to_string(port)) != std::string::npos);
  up.signal(SIGINT);
  const bool ended = up.wait_for(60s).has_value();
  const auto log = read_file(dir / "up.err");
  INFO("the end of up.err: ", log.substr(log.size() > 4000 ? log.size() - 4000 : 0));
  CHECK(ended);
}
