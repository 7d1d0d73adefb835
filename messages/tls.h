// TLS between nodes (docs/security.md), through OpenSSL: one context per
// node (its certificate and key, the cluster's CA; both sides verify the
// peer against that CA, TLS 1.2 at least), sessions on connected sockets
// that already proved the cluster token (messages/handshake.h). The server
// ends its handshake with one confirmation byte, so that a client whose
// certificate the server refused learns it before it hands the socket on.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include <openssl/ssl.h>

#include "abg/error.h"

namespace abg::msg::tls {

struct files {
  std::string certificate, key, ca; // PEM
};

struct ssl_free {
  void operator()(SSL* s) const { SSL_free(s); }
};
/// One connection's TLS state, owning its SSL (not the socket).
using session = std::unique_ptr<SSL, ssl_free>;

class context {
public:
  /// Loads and checks the certificate, its key and the CA.
  static expected<std::shared_ptr<context>> load(const files& f);
  ~context();
  context(const context&) = delete;
  context& operator=(const context&) = delete;
  SSL_CTX* get() const { return ctx_; }
  const files& source() const { return files_; }

private:
  context() = default;
  SSL_CTX* ctx_ = nullptr;
  files files_;
};

/// The client side on a connected socket: the TLS handshake and the
/// server's confirmation, polling until `timeout`.
expected<session> connect(int fd, context& ctx, std::chrono::milliseconds timeout);

/// The server side of one connection, driven by a caller that polls
/// (actors/node/gate.h): on_event() after each readiness of wants().
class acceptor {
public:
  enum class step { more, passed, refused };
  acceptor(int fd, context& ctx);
  step on_event();
  /// POLLIN or POLLOUT: what the socket must become ready for next.
  short wants() const { return wants_; }
  session take() { return std::move(ssl_); }
  const std::string& why() const { return why_; }

private:
  step refuse(std::string why);
  session ssl_;
  short wants_;
  bool confirmed_ = false;
  std::string why_;
};

/// What a read or write on a session did: `n` bytes moved (ok), or it must
/// wait for the socket (want_read, want_write), or the peer closed or failed.
enum class io { ok, want_read, want_write, closed, failed };
io read_some(SSL* s, void* data, std::size_t len, std::size_t& n);
io write_some(SSL* s, const void* data, std::size_t len, std::size_t& n);

/// OpenSSL's last errors as text (and empties its queue).
std::string last_error();

} // namespace abg::msg::tls
