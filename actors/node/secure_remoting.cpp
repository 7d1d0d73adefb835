#include "actors/node/secure_remoting.h"

#include <unistd.h>

#include <caf/io/all.hpp>
#include <caf/io/middleman_actor_impl.hpp>
#include <caf/io/network/default_multiplexer.hpp>
#include <caf/io/network/doorman_impl.hpp>
#include <caf/io/network/stream_impl.hpp>
#include <caf/policy/tcp.hpp>

#include <fmt/format.h>

#include "actors/node/basp_counter.h"
#include "actors/role_traffic.h"
#include "actors/traffic.h"

namespace abg::actors {

namespace {

using caf::io::network::default_multiplexer;

default_multiplexer& multiplexer_of(caf::actor_system& sys) {
  return static_cast<default_multiplexer&>(sys.middleman().backend());
}

using rw_state = caf::io::network::rw_state;

// CAF's stream over a TLS session that the gate or connect() finished: the
// multiplexer polls the socket, reads and writes go through OpenSSL.
struct tls_policy {
  explicit tls_policy(msg::tls::session s) : ssl(std::move(s)) {}
  rw_state read_some(std::size_t& n, caf::io::network::native_socket, void* buf, std::size_t len) {
    return state(msg::tls::read_some(ssl.get(), buf, len, n), len);
  }
  rw_state write_some(std::size_t& n, caf::io::network::native_socket, const void* buf, std::size_t len) {
    return state(msg::tls::write_some(ssl.get(), buf, len, n), len);
  }
  bool must_read_more(caf::io::network::native_socket, std::size_t threshold) {
    return static_cast<std::size_t>(SSL_pending(ssl.get())) >= threshold;
  }
  static rw_state state(msg::tls::io r, std::size_t len) {
    switch (r) {
      case msg::tls::io::ok: return rw_state::success;
      // Waiting for the socket is no failure: the multiplexer calls again.
      case msg::tls::io::want_read:
      case msg::tls::io::want_write: return len == 0 ? rw_state::indeterminate : rw_state::success;
      default: return rw_state::failure;
    }
  }
  msg::tls::session ssl;
};

// `Inner`'s reads and writes (plain TCP or TLS), with the BASP messages in
// the bytes that passed counted as the connection's traffic (traffic.h) and
// by the roles they pass between (role_traffic.h): CAF 0.17 counts none itself.
template <class Inner>
struct counting_policy {
  template <class... Ts>
  explicit counting_policy(int fd, Ts&&... xs) : inner(std::forward<Ts>(xs)...), peer(traffic::peer_of(fd)) {
    role_traffic::connection_opened(traffic::local_of(fd));
  }
  rw_state read_some(std::size_t& n, caf::io::network::native_socket fd, void* buf, std::size_t len) {
    n = 0;
    const auto r = inner.read_some(n, fd, buf, len);
    if (r != rw_state::failure && n > 0)
      if (const auto m = in.feed(buf, n, [this](const basp_message& b) { by_role(false, b); }))
        traffic::count_caf_messages(peer, 0, m);
    return r;
  }
  rw_state write_some(std::size_t& n, caf::io::network::native_socket fd, const void* buf, std::size_t len) {
    n = 0;
    const auto r = inner.write_some(n, fd, buf, len);
    if (r != rw_state::failure && n > 0)
      if (const auto m = out.feed(buf, n, [this](const basp_message& b) { by_role(true, b); }))
        traffic::count_caf_messages(peer, m, 0);
    return r;
  }
  bool must_read_more(caf::io::network::native_socket fd, std::size_t threshold) {
    return inner.must_read_more(fd, threshold);
  }
  void by_role(bool outgoing, const basp_message& b) {
    role_traffic::count(peer, outgoing, b.operation, b.source, b.dest, b.bytes);
  }
  Inner inner;
  std::string peer;
  basp_counter in, out;
};

// CAF's scribe (its scribe_impl, with the policy ours): every connection of
// a node, plain or TLS, so that each one's messages are counted.
template <class Policy>
class counted_scribe : public caf::io::scribe {
public:
  template <class... Ts>
  counted_scribe(default_multiplexer& mx, caf::io::network::native_socket fd, Ts&&... policy_args)
      : scribe(caf::io::network::conn_hdl_from_socket(fd)), stream_(mx, fd, fd, std::forward<Ts>(policy_args)...) {}

  void configure_read(caf::io::receive_policy::config config) override {
    stream_.configure_read(config);
    if (!launched_) {
      launched_ = true;
      stream_.start(this);
    }
  }
  void ack_writes(bool enable) override { stream_.ack_writes(enable); }
  std::vector<char>& wr_buf() override { return stream_.wr_buf(); }
  std::vector<char>& rd_buf() override { return stream_.rd_buf(); }
  void graceful_shutdown() override {
    stream_.graceful_shutdown();
    detach(&stream_.backend(), false);
  }
  void flush() override { stream_.flush(this); }
  std::string addr() const override {
    auto x = caf::io::network::remote_addr_of_fd(stream_.fd());
    return x ? *x : std::string{};
  }
  std::uint16_t port() const override {
    auto x = caf::io::network::remote_port_of_fd(stream_.fd());
    return x ? *x : 0;
  }
  void add_to_loop() override { stream_.activate(this); }
  void remove_from_loop() override { stream_.passivate(); }

private:
  bool launched_ = false;
  caf::io::network::stream_impl<Policy> stream_;
};

// A scribe for a socket that passed the gate or connect(): over TLS when it has a session.
caf::io::scribe_ptr scribe_for(default_multiplexer& mx, int fd, msg::tls::session tls) {
  if (tls) return caf::make_counted<counted_scribe<counting_policy<tls_policy>>>(mx, fd, std::move(tls));
  return caf::make_counted<counted_scribe<counting_policy<caf::policy::tcp>>>(mx, fd);
}

// A doorman whose accepted sockets go to the gate; BASP hears of one (a
// new_connection_msg, as from CAF's own doorman) only after it passed.
class gated_doorman : public caf::io::network::doorman_impl {
public:
  gated_doorman(default_multiplexer& mx, caf::io::network::native_socket fd, std::shared_ptr<gate> g)
      : doorman_impl(mx, fd), gate_(std::move(g)) {}

  bool new_connection() override {
    if (detached()) return false;
    auto fd = acceptor_.accepted_socket();
    acceptor_.accepted_socket() = caf::io::network::invalid_native_socket;
    caf::intrusive_ptr<gated_doorman> self{this};
    auto* mx = &acceptor_.backend();
    gate_->admit(fd, [self, mx](int passed, msg::tls::session tls) {
      mx->post([self, passed, tls = std::move(tls)]() mutable { self->hand_over(passed, std::move(tls)); });
    });
    return true;
  }

private:
  // On the multiplexer's thread.
  void hand_over(int fd, msg::tls::session tls) {
    if (detached()) {
      ::close(fd);
      return;
    }
    auto& mx = acceptor_.backend();
    auto scribe = scribe_for(mx, fd, std::move(tls));
    auto hdl = scribe->hdl();
    parent()->add_scribe(std::move(scribe));
    doorman::new_connection(&mx, hdl);
  }

  std::shared_ptr<gate> gate_;
};

class gated_middleman : public caf::io::middleman_actor_impl {
public:
  gated_middleman(caf::actor_config& cfg, caf::actor broker, std::shared_ptr<gate> g)
      : middleman_actor_impl(cfg, std::move(broker)), gate_(std::move(g)) {}

  const char* name() const override { return "abg.gated_middleman"; }

protected:
  caf::expected<caf::io::scribe_ptr> connect(const std::string& host, std::uint16_t port) override {
    auto fd = caf::io::network::new_tcp_connection(host, port);
    if (!fd) return std::move(fd.error());
    bool refused = false;
    if (auto ok = msg::handshake::run_client(*fd, gate_->token().key, gate_->tls() != nullptr,
                                             gate_->bounds().timeout, gate_->token().source, &refused);
        !ok) {
      ::close(*fd);
      return caf::make_error(refused ? handshake_refused : caf::sec::cannot_connect_to_node,
                             fmt::format("the node at {}:{}: {}", host, port, ok.error().message));
    }
    msg::tls::session tls;
    if (auto* ctx = gate_->tls()) {
      auto s = msg::tls::connect(*fd, *ctx, gate_->bounds().timeout);
      if (!s) {
        ::close(*fd);
        return caf::make_error(caf::sec::cannot_connect_to_node,
                               fmt::format("the node at {}:{}: {}", host, port, s.error().message));
      }
      tls = std::move(*s);
    }
    return scribe_for(multiplexer_of(system()), *fd, std::move(tls));
  }

  caf::expected<caf::io::doorman_ptr> open(std::uint16_t port, const char* addr, bool reuse) override {
    auto fd = caf::io::network::new_tcp_acceptor_impl(port, addr, reuse);
    if (!fd) return std::move(fd.error());
    return caf::make_counted<gated_doorman>(multiplexer_of(system()), *fd, gate_);
  }

private:
  std::shared_ptr<gate> gate_;
};

} // namespace

gate* gate_of(caf::actor_system& sys) {
  auto* cfg = dynamic_cast<const secured_system_config*>(&sys.config());
  return cfg ? cfg->gate.get() : nullptr;
}

secure_remoting::secure_remoting(caf::actor_system& sys) : sys_(sys) {
  auto* cfg = dynamic_cast<const secured_system_config*>(&sys.config());
  if (!cfg || !cfg->gate) throw std::logic_error("secure_remoting needs an actor system with a gate");
  auto basp = sys.middleman().named_broker<caf::io::basp_broker>(caf::atom("BASP"));
  mm_ = sys.spawn<gated_middleman, caf::detached + caf::hidden>(std::move(basp), cfg->gate);
}

secure_remoting::~secure_remoting() {
  // No socket may pass the gate into a multiplexer that is going away.
  if (auto* g = gate_of(sys_)) g->stop();
  caf::anon_send_exit(mm_, caf::exit_reason::kill);
  caf::scoped_actor self{sys_};
  self->wait_for(mm_);
}

caf::expected<std::uint16_t> secure_remoting::publish_impl(caf::strong_actor_ptr whom, std::set<std::string> sigs,
                                                           std::uint16_t port, const std::string& host) {
  auto f = caf::make_function_view(mm_);
  return f(caf::publish_atom::value, port, std::move(whom), std::move(sigs), host, true);
}

caf::expected<caf::strong_actor_ptr> secure_remoting::remote_impl(std::set<std::string> sigs, const std::string& host,
                                                                  std::uint16_t port) {
  auto f = caf::make_function_view(mm_);
  auto res = f(caf::connect_atom::value, host, port);
  if (!res) return std::move(res.error());
  auto ptr = std::move(std::get<1>(*res));
  if (!ptr) return caf::make_error(caf::sec::no_actor_published_at_port, port);
  if (!sys_.assignable(std::get<2>(*res), sigs))
    return caf::make_error(caf::sec::unexpected_actor_messaging_interface, std::move(sigs),
                           std::move(std::get<2>(*res)));
  return ptr;
}

} // namespace abg::actors
