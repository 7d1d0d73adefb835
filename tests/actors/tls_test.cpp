// TLS between nodes (messages/tls.h behind actors/node/gate.h and
// actors/node/secure_remoting.h), with certificates from
// write_cluster_certificates and real sockets on loopback between actor
// systems of this process: nodes of one CA reach each other (CAF messages
// and the bulk channel); a certificate of another CA, an expired one, and a
// node without TLS are refused, each logged by the node with why; a write to
// a peer that has gone is an error, not a SIGPIPE that kills the node.
#include <torch/torch.h>

#include <doctest/doctest.h>

#include <thread>
#include <vector>

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <caf/io/all.hpp>
#include <fmt/format.h>

#include "abg/certs.h"
#include "actors/node/secure_remoting.h"
#include "actors/partition_bulk_server.h"
#include "actors/partition_client.h"
#include "actors/spawn.h"
#include "messages/messages.h"
#include "messages/tls.h"
#include "tests/actors/log_lines.h"
#include "tests/test_util.h"

using namespace abg;
using namespace std::chrono_literals;

namespace {

const cluster_token token{std::vector<std::uint8_t>(32, 9), "test"};


// Certificates of a CA for nodes "a" and "b" on 127.0.0.1, in dir/sub.
void make_certs(const std::filesystem::path& dir, int days = 365) {
  cluster_spec spec;
  spec.nodes = {{"a", "127.0.0.1", 1, {}}, {"b", "127.0.0.1", 2, {}}};
  auto w = write_cluster_certificates(spec, dir, days);
  REQUIRE_MESSAGE(w, (w ? "" : w.error().message));
}

std::shared_ptr<msg::tls::context> tls_of(const std::filesystem::path& dir, const std::string& node) {
  auto c = msg::tls::context::load({(dir / (node + ".pem")).string(), (dir / (node + ".key")).string(),
                                    (dir / "ca.pem").string()});
  REQUIRE_MESSAGE(c, (c ? "" : c.error().message));
  return *c;
}

struct tls_node {
  actors::secured_system_config cfg;
  std::unique_ptr<caf::actor_system> sys;
  std::unique_ptr<actors::secure_remoting> remoting;
  test::log_lines log;
  explicit tls_node(std::shared_ptr<msg::tls::context> tls) {
    msg::register_message_types(cfg);
    cfg.load<caf::io::middleman>();
    cfg.set("logger.console", caf::atom("none"));
    cfg.set("scheduler.max-threads", 2);
    cfg.gate = std::make_shared<actors::gate>(token, actors::gate::limits{std::chrono::milliseconds(3000), 64},
                                              [this](const std::string& l) { log.add(l); }, std::move(tls));
    sys = std::make_unique<caf::actor_system>(cfg);
    remoting = std::make_unique<actors::secure_remoting>(*sys);
  }
  ~tls_node() { remoting.reset(); }
};

caf::behavior doubler() {
  return {[](int x) { return 2 * x; }};
}

bool eventually(const std::function<bool()>& f) {
  for (int i = 0; i < 200; ++i) {
    if (f()) return true;
    std::this_thread::sleep_for(20ms);
  }
  return f();
}

} // namespace

TEST_CASE("TLS between nodes: one CA's nodes talk; another CA and plaintext are refused") {
  test::scratch_dir dir;
  make_certs(dir / "ours");
  make_certs(dir / "theirs");
  tls_node a(tls_of(dir / "ours", "a"));
  auto target = a.sys->spawn(doubler);
  auto port = a.remoting->publish(target, 0, "127.0.0.1");
  REQUIRE(port);

  SUBCASE("a certificate of the same CA: CAF messages over TLS") {
    tls_node b(tls_of(dir / "ours", "b"));
    auto remote = b.remoting->remote_actor<caf::actor>("127.0.0.1", *port);
    REQUIRE_MESSAGE(remote, (remote ? "" : b.sys->render(remote.error())));
    caf::scoped_actor self{*b.sys};
    int got = 0;
    self->request(*remote, 10s, 21).receive([&](int y) { got = y; }, [](caf::error&) {});
    CHECK(got == 42);
    CHECK(a.cfg.gate->refused() == 0);
  }
  SUBCASE("a certificate of another CA is refused and logged") {
    tls_node c(tls_of(dir / "theirs", "b"));
    auto remote = c.remoting->remote_actor<caf::actor>("127.0.0.1", *port);
    REQUIRE_FALSE(remote);
    CAPTURE(c.sys->render(remote.error()));
    CHECK(c.sys->render(remote.error()).find("TLS") != std::string::npos);
    CHECK(eventually([&] { return a.log.has("refused a connection from 127.0.0.1"); }));
    CAPTURE(a.log.all());
    CHECK(a.log.has("TLS: "));
  }
  SUBCASE("a node that trusts our CA but holds another CA's certificate is refused by the node, which says why") {
    auto mixed = msg::tls::context::load({(dir / "theirs" / "b.pem").string(), (dir / "theirs" / "b.key").string(),
                                          (dir / "ours" / "ca.pem").string()});
    REQUIRE(mixed);
    tls_node m(*mixed);
    auto remote = m.remoting->remote_actor<caf::actor>("127.0.0.1", *port);
    REQUIRE_FALSE(remote);
    CAPTURE(m.sys->render(remote.error()));
    CHECK(m.sys->render(remote.error()).find("refused this node's certificate") != std::string::npos);
    CHECK(eventually([&] { return a.log.has("its certificate was refused"); }));
    CAPTURE(a.log.all());
  }
  SUBCASE("a node without TLS is refused at once, both sides saying why") {
    tls_node p(nullptr);
    auto remote = p.remoting->remote_actor<caf::actor>("127.0.0.1", *port);
    REQUIRE_FALSE(remote);
    CHECK(remote.error() == actors::handshake_refused);
    CHECK(p.sys->render(remote.error()).find("it uses TLS between nodes and this node does not") !=
          std::string::npos);
    CHECK(eventually([&] { return a.log.has("this node uses TLS between nodes and it does not"); }));
  }
  caf::anon_send_exit(target, caf::exit_reason::user_shutdown);
}

TEST_CASE("TLS between nodes: an expired certificate of the same CA is refused, naming the expiry") {
  test::scratch_dir dir;
  make_certs(dir / "expired", 0);
  tls_node a(tls_of(dir / "expired", "a"));
  auto target = a.sys->spawn(doubler);
  auto port = a.remoting->publish(target, 0, "127.0.0.1");
  REQUIRE(port);
  tls_node b(tls_of(dir / "expired", "b"));
  auto remote = b.remoting->remote_actor<caf::actor>("127.0.0.1", *port);
  REQUIRE_FALSE(remote);
  CAPTURE(b.sys->render(remote.error()));
  CHECK(b.sys->render(remote.error()).find("certificate has expired") != std::string::npos);
  caf::anon_send_exit(target, caf::exit_reason::user_shutdown);
}

TEST_CASE("TLS between nodes: the bulk channel moves a partition both ways over TLS") {
  test::scratch_dir dir;
  make_certs(dir / "ours");
  tls_node a(tls_of(dir / "ours", "a"));
  tls_node b(tls_of(dir / "ours", "b"));
  auto ps = actors::spawn_partition_server(*a.sys, "test partition server");
  auto bulk = actors::partition_bulk_server::start(*a.sys, ps, "127.0.0.1", {});
  REQUIRE(bulk);
  actors::partition_server_ref ref{ps, fmt::format("127.0.0.1:{}", (*bulk)->port())};
  // 30,000 rows of 100 floats: 12 MB, several TLS records and chunks.
  model::table t{torch::randn({30000, 100}), torch::rand({30000})};
  REQUIRE(actors::store_table(*b.sys, ref, {"node", 1}, t, 3, msg::any_version, 30s));
  auto back = actors::fetch_table(*b.sys, ref, {"node", 1}, 3, 30s);
  REQUIRE_MESSAGE(back, (back ? "" : back.error().message));
  CHECK(torch::equal(back->table.embeddings, t.embeddings));
  CHECK(torch::equal(back->table.state, t.state));
  // A process without TLS cannot reach it.
  tls_node p(nullptr);
  auto refused = actors::fetch_table(*p.sys, ref, {"node", 1}, 3, 10s);
  REQUIRE_FALSE(refused);
  CHECK(refused.error().message.find("uses TLS between nodes") != std::string::npos);
  bulk->reset();
  caf::anon_send_exit(ps, caf::exit_reason::user_shutdown);
}

// A console that quit or a node that died: the next TLS write to it must
// fail. OpenSSL's own socket BIO writes with write(), whose SIGPIPE would end
// this test binary (and a node) here.
TEST_CASE("TLS between nodes: a write to a peer that has gone fails, without SIGPIPE") {
  test::scratch_dir dir;
  make_certs(dir / "ours");
  auto a = tls_of(dir / "ours", "a");
  auto b = tls_of(dir / "ours", "b");
  int fds[2];
  REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, fds) == 0);
  auto accepted = msg::tls::acceptor::step::more;
  std::thread server([&] {
    msg::tls::acceptor acceptor(fds[1], *a);
    accepted = acceptor.on_event();
    for (int i = 0; i < 200 && accepted == msg::tls::acceptor::step::more; ++i) {
      pollfd p{fds[1], acceptor.wants(), 0};
      ::poll(&p, 1, 50);
      accepted = acceptor.on_event();
    }
    // The peer goes: its session and its socket.
    acceptor.take().reset();
    ::close(fds[1]);
  });
  auto client = msg::tls::connect(fds[0], *b, 10s);
  server.join();
  REQUIRE(accepted == msg::tls::acceptor::step::passed);
  REQUIRE_MESSAGE(client, (client ? "" : client.error().message));
  const std::vector<char> data(4096, 'x');
  auto result = msg::tls::io::ok;
  for (int i = 0; i < 100 && result == msg::tls::io::ok; ++i) {
    std::size_t n = 0;
    result = msg::tls::write_some(client->get(), data.data(), data.size(), n);
  }
  CHECK(result == msg::tls::io::failed);
  client->reset();
  ::close(fds[0]);
}
