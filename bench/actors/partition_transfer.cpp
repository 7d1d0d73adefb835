// Partition transfer between two processes on loopback: a partition of
// SIZE bytes of embeddings (plus its row-wise optimizer state) put to and
// fetched from a partition server in another process, through its bulk
// channel (what trainers use between processes) and through CAF messages
// (8 MiB chunks, four in flight), against a plain TCP socket copying the
// same bytes each way, in the same run.
// Prints one line and appends it, with the command, to bench/results.md.
//
// With --tls, both processes talk TLS (certificates of a fresh CA, as
// `abg cluster certs` makes them), CAF messages and the bulk channel alike.
// With --on-disk, the partition server stores on disk (as with a partition
// buffer) in a directory under /tmp, and takes bulk puts a block at a time.
//
//   build/partition_transfer [--gib 1] [--dim 100] [--repeat 3] [--tls] [--on-disk] [--results FILE]
#include <torch/torch.h>

#include <chrono>
#include <ctime>
#include <filesystem>
#include <cstring>
#include <fstream>
#include <thread>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <caf/io/all.hpp>
#include <fmt/format.h>

#include "abg/certs.h"
#include "actors/node/run_common.h"
#include "actors/node/secure_remoting.h"
#include "actors/partition_bulk_server.h"
#include "actors/partition_client.h"
#include "actors/spawn.h"

namespace {

// Both processes hold this token, as the nodes of a cluster do: every
// connection pays the handshake, as between nodes.
const abg::cluster_token bench_token{std::vector<std::uint8_t>(32, 42), "benchmark"};

// The TLS context of `node` ("server" or "client") from the certificates in `dir`; null without TLS.
std::shared_ptr<abg::msg::tls::context> tls_of(const std::string& dir, const std::string& node) {
  if (dir.empty()) return nullptr;
  auto c = abg::msg::tls::context::load({dir + "/" + node + ".pem", dir + "/" + node + ".key", dir + "/ca.pem"});
  if (!c) {
    fmt::print(stderr, "partition_transfer: {}\n", c.error().message);
    std::exit(1);
  }
  return *c;
}

using clock_type = std::chrono::steady_clock;
double since(clock_type::time_point t) { return std::chrono::duration<double>(clock_type::now() - t).count(); }

bool write_all(int fd, const char* p, std::size_t n) {
  while (n > 0) {
    auto k = ::send(fd, p, n, MSG_NOSIGNAL);
    if (k <= 0) return false;
    p += k;
    n -= static_cast<std::size_t>(k);
  }
  return true;
}

bool read_all(int fd, char* p, std::size_t n) {
  while (n > 0) {
    auto k = ::recv(fd, p, n, 0);
    if (k <= 0) return false;
    p += k;
    n -= static_cast<std::size_t>(k);
  }
  return true;
}

int listen_loopback(std::uint16_t& port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(fd, 1) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0)
    return -1;
  port = ntohs(a.sin_port);
  return fd;
}

int connect_loopback(std::uint16_t port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(port);
  return ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 ? fd : -1;
}

// Adds `entry` at the end of the section of `file` whose heading starts with
// `heading` (a new section at the end when there is none).
void append_to_section(const std::string& file, const std::string& heading, const std::string& entry) {
  std::ifstream in(file);
  std::vector<std::string> lines;
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  std::size_t at = lines.size();
  bool found = false;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    if (lines[i].rfind(heading, 0) == 0) {
      found = true;
      at = lines.size();
      for (std::size_t j = i + 1; j < lines.size(); ++j)
        if (lines[j].rfind("## ", 0) == 0) {
          at = j;
          break;
        }
      while (at > i + 1 && lines[at - 1].empty()) --at; // before the blank lines ending the section
      break;
    }
  }
  if (!found) {
    lines.push_back("");
    lines.push_back(heading);
    lines.push_back("");
    at = lines.size();
  }
  lines.insert(lines.begin() + static_cast<std::ptrdiff_t>(at), entry);
  std::ofstream out(file, std::ios::trunc);
  for (auto& l : lines) out << l << "\n";
}

// The other process: a partition server published through the middleman,
// and a plain socket that takes `bytes` and gives them back, `repeat` times.
[[noreturn]] void serve(int report, std::size_t bytes, int repeat, const std::string& certs,
                        const std::string& store) {
  abg::actors::secured_system_config cfg;
  cfg.gate = std::make_shared<abg::actors::gate>(bench_token, abg::actors::gate::limits{}, nullptr,
                                                 tls_of(certs, "server"));
  abg::cluster_spec spec; // default heartbeats
  abg::actors::configure_system(cfg, &spec);
  caf::actor_system sys{cfg};
  abg::actors::secure_remoting remoting{sys};
  abg::actors::table_store where;
  if (!store.empty()) {
    where.dataset = abg::storage::dataset_id::random();
    where.disk_path = store;
  }
  auto ps = abg::actors::spawn_partition_server(sys, "benchmark partition server", where);
  auto caf_port = remoting.publish(ps, 0, "127.0.0.1");
  auto bulk = abg::actors::partition_bulk_server::start(sys, ps, "127.0.0.1", {}, nullptr, !store.empty());
  std::uint16_t tcp_port = 0;
  int listener = listen_loopback(tcp_port);
  std::uint16_t ports[3] = {caf_port ? *caf_port : std::uint16_t{0}, tcp_port, bulk ? (*bulk)->port() : std::uint16_t{0}};
  write_all(report, reinterpret_cast<const char*>(ports), sizeof ports);
  int fd = ::accept(listener, nullptr, nullptr);
  std::vector<char> buf(bytes);
  char ack = 1;
  for (int r = 0; r < repeat; ++r) {
    if (!read_all(fd, buf.data(), bytes) || !write_all(fd, &ack, 1) || !write_all(fd, buf.data(), bytes)) break;
  }
  ::close(fd);
  // Stay until the parent is done with the partition server.
  char done = 0;
  (void)!::read(report, &done, 1);
  ::_exit(0);
}

} // namespace

int main(int argc, char** argv) {
  CLI::App app{"Partition transfer through CAF's middleman against a plain TCP socket, on loopback"};
  double gib = 1.0;
  std::int64_t dim = 100;
  int repeat = 3;
  std::string results = "bench/results.md";
  app.add_option("--gib", gib, "Embedding bytes of the partition, in GiB")->check(CLI::PositiveNumber);
  app.add_option("--dim", dim, "Dimension")->check(CLI::PositiveNumber);
  app.add_option("--repeat", repeat, "Transfers of each kind (the best one counts)")->check(CLI::PositiveNumber);
  app.add_option("--results", results, "Results file to append to ('' for none)");
  bool tls = false;
  app.add_flag("--tls", tls, "TLS between the two processes (a fresh CA's certificates)");
  bool on_disk = false;
  app.add_flag("--on-disk", on_disk, "The partition server stores on disk (under /tmp), as with a partition buffer");
  CLI11_PARSE(app, argc, argv);
  const auto rows = static_cast<std::int64_t>(gib * (1ull << 30) / (4.0 * static_cast<double>(dim)));
  const std::size_t bytes = static_cast<std::size_t>(rows) * static_cast<std::size_t>(dim + 1) * 4;
  std::string certs;
  if (tls) {
    char dir[] = "/tmp/abg-transfer-XXXXXX";
    if (!::mkdtemp(dir)) return 1;
    certs = std::string(dir) + "/certs";
    abg::cluster_spec spec;
    spec.nodes = {{"server", "127.0.0.1", 1, {}}, {"client", "127.0.0.1", 2, {}}};
    if (auto w = abg::write_cluster_certificates(spec, certs); !w) {
      fmt::print(stderr, "partition_transfer: {}\n", w.error().message);
      return 1;
    }
  }
  std::string store;
  if (on_disk) {
    char dir[] = "/tmp/abg-transfer-store-XXXXXX";
    if (!::mkdtemp(dir)) return 1;
    store = dir;
  }
  int pipefd[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM, 0, pipefd) != 0) return 1;
  pid_t child = ::fork();
  if (child == 0) {
    ::close(pipefd[0]);
    serve(pipefd[1], bytes, repeat, certs, store);
  }
  ::close(pipefd[1]);
  std::uint16_t ports[3] = {0, 0, 0};
  if (!read_all(pipefd[0], reinterpret_cast<char*>(ports), sizeof ports) || ports[0] == 0 || ports[1] == 0 ||
      ports[2] == 0) {
    fmt::print(stderr, "partition_transfer: the serving process did not start\n");
    return 1;
  }
  // Plain TCP: the same bytes each way.
  double tcp_send = 1e30, tcp_recv = 1e30;
  {
    int fd = connect_loopback(ports[1]);
    std::vector<char> buf(bytes, 7);
    char ack = 0;
    for (int r = 0; r < repeat; ++r) {
      auto t0 = clock_type::now();
      if (!write_all(fd, buf.data(), bytes) || !read_all(fd, &ack, 1)) return 1;
      tcp_send = std::min(tcp_send, since(t0));
      auto t1 = clock_type::now();
      if (!read_all(fd, buf.data(), bytes)) return 1;
      tcp_recv = std::min(tcp_recv, since(t1));
    }
    ::close(fd);
  }
  // The partition client, through the bulk channel and through CAF messages.
  double bulk_put = 1e30, bulk_get = 1e30, caf_put = 1e30, caf_get = 1e30;
  {
    abg::actors::secured_system_config cfg;
    cfg.gate = std::make_shared<abg::actors::gate>(bench_token, abg::actors::gate::limits{}, nullptr,
                                                   tls_of(certs, "client"));
    abg::cluster_spec spec;
    abg::actors::configure_system(cfg, &spec);
    caf::actor_system sys{cfg};
    abg::actors::secure_remoting remoting{sys};
    auto server = remoting.remote_actor<abg::msg::partition_server_actor>("127.0.0.1", ports[0]);
    if (!server) {
      fmt::print(stderr, "partition_transfer: {}\n", sys.render(server.error()));
      return 1;
    }
    abg::model::table t{torch::randn({rows, dim}), torch::rand({rows})};
    abg::msg::partition_key key{"bench", 0};
    std::uint64_t version = 1;
    for (bool through_bulk : {true, false}) {
      abg::actors::partition_server_ref ref{*server, through_bulk ? fmt::format("127.0.0.1:{}", ports[2]) : ""};
      auto& put_s = through_bulk ? bulk_put : caf_put;
      auto& get_s = through_bulk ? bulk_get : caf_get;
      for (int r = 0; r < repeat; ++r) {
        auto t0 = clock_type::now();
        auto put = abg::actors::store_table(sys, ref, key, t, version, abg::msg::any_version, std::chrono::minutes(10));
        if (!put) {
          fmt::print(stderr, "partition_transfer: {}\n", put.error().message);
          return 1;
        }
        put_s = std::min(put_s, since(t0));
        auto t1 = clock_type::now();
        auto got = abg::actors::fetch_table(sys, ref, key, version, std::chrono::minutes(10));
        if (!got) {
          fmt::print(stderr, "partition_transfer: {}\n", got.error().message);
          return 1;
        }
        get_s = std::min(get_s, since(t1));
        if (r == 0 && !torch::equal(got->table.embeddings, t.embeddings)) {
          fmt::print(stderr, "partition_transfer: the partition came back different\n");
          return 1;
        }
        ++version;
      }
    }
  }
  char done = 1;
  (void)!::write(pipefd[0], &done, 1);
  int status = 0;
  ::waitpid(child, &status, 0);
  if (!certs.empty()) std::filesystem::remove_all(std::filesystem::path(certs).parent_path());
  if (!store.empty()) std::filesystem::remove_all(store);
  const double gb = static_cast<double>(bytes) / 1e9;
  auto line = fmt::format(
    "partition transfer between two processes on loopback{}{}, {:.2f} GB (embeddings [{}, {}] + optimizer state), best "
    "of {}: bulk channel put {:.2f} GB/s, get {:.2f} GB/s ({:.0f}% and {:.0f}% of the plain TCP socket); CAF "
    "messages put {:.2f} GB/s, get {:.2f} GB/s ({:.0f}%, {:.0f}%); plain TCP socket send {:.2f} GB/s, receive "
    "{:.2f} GB/s",
    tls ? " over TLS" : "", on_disk ? ", the partition server storing on disk" : "", gb, rows, dim, repeat, gb / bulk_put, gb / bulk_get, 100 * tcp_send / bulk_put, 100 * tcp_recv / bulk_get,
    gb / caf_put, gb / caf_get, 100 * tcp_send / caf_put, 100 * tcp_recv / caf_get, gb / tcp_send, gb / tcp_recv);
  fmt::print("{}\n", line);
  if (!results.empty()) {
    std::string cmd;
    for (int i = 0; i < argc; ++i) cmd += (i ? " " : "") + std::string(argv[i]);
    std::time_t now = std::time(nullptr);
    char day[16];
    std::strftime(day, sizeof day, "%Y-%m-%d", std::gmtime(&now));
    append_to_section(results, "## cluster", fmt::format("- {} {} (`{}`)", day, line, cmd));
  }
  return 0;
}
