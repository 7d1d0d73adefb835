// The cluster token in front of CAF's remoting (actors/node/secure_remoting.h,
// actors/node/gate.h), with real sockets on loopback between actor systems
// of this process: a node with the token reaches a published actor; one
// with another token, a plain CAF peer speaking correct BASP, a forged
// proof, and idle or trickling strangers get nothing and change nothing.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <caf/io/all.hpp>

#include "actors/node/secure_remoting.h"
#include "messages/handshake.h"
#include "tests/actors/log_lines.h"

using namespace abg;
using namespace std::chrono_literals;

namespace {

cluster_token token_of(std::uint8_t fill) { return {std::vector<std::uint8_t>(32, fill), fmt::format("test {}", fill)}; }


// One node's actor system behind a gate with `token`.
struct node {
  actors::secured_system_config cfg;
  std::unique_ptr<caf::actor_system> sys;
  std::unique_ptr<actors::secure_remoting> remoting;
  test::log_lines log;
  node(const cluster_token& token, actors::gate::limits limits = {}) {
    cfg.load<caf::io::middleman>();
    cfg.set("logger.console", caf::atom("none"));
    cfg.set("scheduler.max-threads", 2);
    cfg.gate = std::make_shared<actors::gate>(token, limits, [this](const std::string& l) { log.add(l); });
    sys = std::make_unique<caf::actor_system>(cfg);
    remoting = std::make_unique<actors::secure_remoting>(*sys);
  }
  ~node() { remoting.reset(); }
};

// Counts what reaches it; answers x + 1.
caf::behavior counter(caf::event_based_actor*, std::shared_ptr<std::atomic<int>> received) {
  return {[received](int x) {
    ++*received;
    return x + 1;
  }};
}

int connect_to(std::uint16_t port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(port);
  REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  return fd;
}

// Whether the peer closed `fd` within `timeout` (reading and dropping what it sent).
bool closed_within(int fd, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  char buf[256];
  while (std::chrono::steady_clock::now() < deadline) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 50) <= 0) continue;
    auto n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) return true;
  }
  return false;
}

int ask(caf::actor_system& sys, const caf::actor& a, int x) {
  caf::scoped_actor self{sys};
  int out = -1;
  self->request(a, std::chrono::seconds(10), x).receive([&](int y) { out = y; }, [](caf::error&) {});
  return out;
}

} // namespace

TEST_CASE("cluster token: only a node with the same token reaches a published actor") {
  node a(token_of(1), {std::chrono::milliseconds(1500), 64});
  auto received = std::make_shared<std::atomic<int>>(0);
  auto target = a.sys->spawn(counter, received);
  auto port = a.remoting->publish(target, 0, "127.0.0.1");
  REQUIRE(port);

  SUBCASE("the same token: a published actor answers") {
    node b(token_of(1));
    auto remote = b.remoting->remote_actor<caf::actor>("127.0.0.1", *port);
    REQUIRE(remote);
    CHECK(ask(*b.sys, *remote, 41) == 42);
    CHECK(*received == 1);
    CHECK(a.cfg.gate->refused() == 0);
  }
  SUBCASE("another token: refused, named as such, logged once by the node") {
    node c(token_of(2));
    auto remote = c.remoting->remote_actor<caf::actor>("127.0.0.1", *port);
    REQUIRE_FALSE(remote);
    CHECK(remote.error() == actors::handshake_refused);
    CHECK(c.sys->render(remote.error()).find("the cluster token did not match") != std::string::npos);
    CHECK(*received == 0);
    for (int i = 0; i < 100 && a.log.count("token did not match") == 0; ++i) std::this_thread::sleep_for(20ms);
    CHECK(a.log.count("refused a connection from 127.0.0.1") == 1);
    CHECK(a.log.count("the cluster token did not match") == 1);
  }
  SUBCASE("a plain CAF peer speaking correct BASP gets no actor and cannot spawn one") {
    caf::actor_system_config plain_cfg;
    plain_cfg.load<caf::io::middleman>();
    plain_cfg.set("logger.console", caf::atom("none"));
    caf::actor_system plain{plain_cfg};
    auto remote = plain.middleman().remote_actor("127.0.0.1", *port);
    CHECK_FALSE(remote);
    // Without BASP's handshake it never learns the node's id: SpawnServ,
    // ConfigServ and actors by id stay out of reach.
    CHECK_FALSE(plain.middleman().remote_spawn<caf::actor>(a.sys->node(), "counter", caf::make_message(), 2s));
    CHECK(*received == 0);
    for (int i = 0; i < 150 && a.cfg.gate->refused() == 0; ++i) std::this_thread::sleep_for(20ms);
    CHECK(a.cfg.gate->refused() >= 1);
  }
  SUBCASE("a forged proof is answered with a refusal and the connection closed") {
    int fd = connect_to(*port);
    std::array<std::uint8_t, msg::handshake::hello_bytes> hello{};
    REQUIRE(::recv(fd, hello.data(), hello.size(), MSG_WAITALL) == static_cast<ssize_t>(hello.size()));
    std::array<std::uint8_t, msg::handshake::nonce_bytes> nonce{};
    auto mine = msg::handshake::hello('c', nonce, false);
    std::array<std::uint8_t, msg::handshake::mac_bytes> forged{};
    forged.fill(0xab);
    REQUIRE(::send(fd, mine.data(), mine.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(mine.size()));
    REQUIRE(::send(fd, forged.data(), forged.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(forged.size()));
    std::uint8_t verdict = 9;
    REQUIRE(::recv(fd, &verdict, 1, MSG_WAITALL) == 1);
    CHECK(verdict == 0);
    CHECK(closed_within(fd, 2s));
    ::close(fd);
    CHECK(*received == 0);
  }
  SUBCASE("100 idle and 100 trickling strangers: each closed by its deadline, the node's peers served meanwhile") {
    node b(token_of(1));
    auto remote = b.remoting->remote_actor<caf::actor>("127.0.0.1", *port);
    REQUIRE(remote);
    std::vector<int> idle, trickle;
    for (int i = 0; i < 100; ++i) idle.push_back(connect_to(*port));
    for (int i = 0; i < 100; ++i) trickle.push_back(connect_to(*port));
    std::atomic<bool> stop{false};
    std::jthread trickler([&] {
      // One byte a second of a plausible hello, to every trickling socket.
      const char head[] = "ABGH";
      for (int k = 0; k < 8 && !stop; ++k) {
        for (int fd : trickle) ::send(fd, head + (k % 4), 1, MSG_NOSIGNAL | MSG_DONTWAIT);
        for (int t = 0; t < 10 && !stop; ++t) std::this_thread::sleep_for(100ms);
      }
    });
    // The established peer keeps being answered, and a new one gets in.
    for (int i = 0; i < 50; ++i) CHECK(ask(*b.sys, *remote, i) == i + 1);
    node late(token_of(1));
    auto late_remote = late.remoting->remote_actor<caf::actor>("127.0.0.1", *port);
    REQUIRE(late_remote);
    CHECK(ask(*late.sys, *late_remote, 1) == 2);
    // Every stranger is closed within the handshake's 1.5 s (plus slack).
    int closed = 0;
    for (int fd : idle) closed += closed_within(fd, 4s);
    for (int fd : trickle) closed += closed_within(fd, 4s);
    stop = true;
    CHECK(closed == 200);
    CHECK(a.cfg.gate->refused() >= 200);
    CHECK(*received == 51);
    for (int fd : idle) ::close(fd);
    for (int fd : trickle) ::close(fd);
  }
  caf::anon_send_exit(target, caf::exit_reason::user_shutdown);
}
