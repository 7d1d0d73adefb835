#include "messages/tls.h"

#include <cerrno>
#include <cstdint>
#include <cstring>

#include <openssl/err.h>
#include <openssl/x509.h>
#include <poll.h>
#include <sys/socket.h>

#include <fmt/format.h>

namespace abg::msg::tls {

namespace {

constexpr unsigned char confirmation = 0x5a;

// Why a handshake failed: the peer's certificate when verification failed,
// else OpenSSL's error queue.
std::string handshake_error(SSL* s, int ret) {
  auto verify = SSL_get_verify_result(s);
  if (verify != X509_V_OK)
    return fmt::format("its certificate was refused: {}", X509_verify_cert_error_string(verify));
  auto err = SSL_get_error(s, ret);
  auto queued = last_error();
  if (!queued.empty()) return queued;
  if (err == SSL_ERROR_SYSCALL || err == SSL_ERROR_ZERO_RETURN)
    return "the peer closed the connection during the TLS handshake (it may have refused this node's certificate, "
           "or does not speak TLS)";
  return fmt::format("TLS error {}", err);
}

// OpenSSL's socket BIO writes with write(), which raises SIGPIPE when the
// peer has gone (a console that quit, a node that died) and kills the
// process. This BIO is the same socket BIO but sends with MSG_NOSIGNAL, so a
// write to a gone peer is an error the caller handles.
long socket_fd(BIO* b) { return static_cast<long>(reinterpret_cast<std::intptr_t>(BIO_get_data(b))); }

bool retriable(int err) { return err == EAGAIN || err == EWOULDBLOCK || err == EINTR; }

int socket_write(BIO* b, const char* data, int len) {
  BIO_clear_retry_flags(b);
  auto n = ::send(static_cast<int>(socket_fd(b)), data, static_cast<std::size_t>(len), MSG_NOSIGNAL);
  if (n < 0 && retriable(errno)) BIO_set_retry_write(b);
  return static_cast<int>(n);
}

int socket_read(BIO* b, char* data, int len) {
  BIO_clear_retry_flags(b);
  auto n = ::recv(static_cast<int>(socket_fd(b)), data, static_cast<std::size_t>(len), 0);
  if (n < 0 && retriable(errno)) BIO_set_retry_read(b);
  if (n == 0) BIO_set_flags(b, BIO_FLAGS_IN_EOF); // OpenSSL tells an unexpected EOF from an error by it
  return static_cast<int>(n);
}

int socket_puts(BIO* b, const char* text) { return socket_write(b, text, static_cast<int>(std::strlen(text))); }

long socket_ctrl(BIO* b, int cmd, long, void* ptr) {
  switch (cmd) {
    case BIO_CTRL_FLUSH:
    case BIO_CTRL_DUP: return 1;
    case BIO_CTRL_EOF: return BIO_test_flags(b, BIO_FLAGS_IN_EOF) != 0;
    case BIO_C_GET_FD:
      if (ptr) *static_cast<int*>(ptr) = static_cast<int>(socket_fd(b));
      return socket_fd(b);
    default: return 0;
  }
}

const BIO_METHOD* socket_method() {
  static BIO_METHOD* m = [] {
    auto* made = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK | BIO_TYPE_DESCRIPTOR, "abg socket");
    if (made && (BIO_meth_set_write(made, socket_write) != 1 || BIO_meth_set_read(made, socket_read) != 1 ||
                 BIO_meth_set_puts(made, socket_puts) != 1 || BIO_meth_set_ctrl(made, socket_ctrl) != 1)) {
      BIO_meth_free(made);
      made = nullptr;
    }
    return made;
  }();
  return m;
}

// SSL_set_fd with the BIO above; the socket stays the caller's.
bool attach_socket(SSL* s, int fd) {
  const auto* m = socket_method();
  BIO* b = m ? BIO_new(m) : nullptr;
  if (!b) return false;
  BIO_set_data(b, reinterpret_cast<void*>(static_cast<std::intptr_t>(fd)));
  BIO_set_init(b, 1);
  SSL_set_bio(s, b, b); // one reference for both directions
  return true;
}

} // namespace

std::string last_error() {
  std::string out;
  while (auto e = ERR_get_error()) {
    char text[256];
    ERR_error_string_n(e, text, sizeof text);
    out += (out.empty() ? "" : "; ") + std::string(text);
  }
  return out;
}

expected<std::shared_ptr<context>> context::load(const files& f) {
  std::shared_ptr<context> c(new context());
  c->files_ = f;
  c->ctx_ = SSL_CTX_new(TLS_method());
  if (!c->ctx_) return fail("TLS: cannot create a context: {}", last_error());
  SSL_CTX_set_min_proto_version(c->ctx_, TLS1_2_VERSION);
  SSL_CTX_set_verify(c->ctx_, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
  // CAF's streams resume partial writes from a buffer that may move.
  SSL_CTX_set_mode(c->ctx_, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  SSL_CTX_set_num_tickets(c->ctx_, 0); // connections live long; no resumption
  if (SSL_CTX_use_certificate_chain_file(c->ctx_, f.certificate.c_str()) != 1)
    return fail("TLS: cannot use the certificate {}: {}", f.certificate, last_error());
  if (SSL_CTX_use_PrivateKey_file(c->ctx_, f.key.c_str(), SSL_FILETYPE_PEM) != 1)
    return fail("TLS: cannot use the key {}: {}", f.key, last_error());
  if (SSL_CTX_check_private_key(c->ctx_) != 1)
    return fail("TLS: the key {} does not belong to the certificate {}", f.key, f.certificate);
  if (SSL_CTX_load_verify_locations(c->ctx_, f.ca.c_str(), nullptr) != 1)
    return fail("TLS: cannot use the CA certificate {}: {}", f.ca, last_error());
  return c;
}

context::~context() {
  if (ctx_) SSL_CTX_free(ctx_);
}

expected<session> connect(int fd, context& ctx, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  session s(SSL_new(ctx.get()));
  if (!s || !attach_socket(s.get(), fd)) return fail("TLS: {}", last_error());
  SSL_set_connect_state(s.get());
  bool handshaken = false;
  for (;;) {
    short want = 0;
    if (!handshaken) {
      int r = SSL_do_handshake(s.get());
      if (r == 1) {
        handshaken = true;
        continue;
      }
      auto e = SSL_get_error(s.get(), r);
      if (e == SSL_ERROR_WANT_READ)
        want = POLLIN;
      else if (e == SSL_ERROR_WANT_WRITE)
        want = POLLOUT;
      else
        return fail("TLS: {}", handshake_error(s.get(), r));
    } else {
      unsigned char byte = 0;
      std::size_t n = 0;
      switch (read_some(s.get(), &byte, 1, n)) {
        case io::ok:
          if (byte != confirmation) return fail("TLS: the peer's confirmation is malformed");
          return s;
        case io::want_read: want = POLLIN; break;
        case io::want_write: want = POLLOUT; break;
        default:
          return fail("TLS: the peer closed the connection after the handshake: it refused this node's certificate "
                      "({})",
                      ctx.source().certificate);
      }
    }
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return fail("TLS: no handshake within {} ms", timeout.count());
    pollfd p{fd, want, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) < 0 && errno != EINTR)
      return fail("TLS: poll failed: {}", std::strerror(errno));
  }
}

acceptor::acceptor(int fd, context& ctx) : ssl_(SSL_new(ctx.get())), wants_(POLLIN) {
  if (ssl_ && !attach_socket(ssl_.get(), fd)) ssl_.reset();
  if (ssl_) SSL_set_accept_state(ssl_.get());
}

acceptor::step acceptor::refuse(std::string why) {
  why_ = "TLS: " + std::move(why);
  return step::refused;
}

acceptor::step acceptor::on_event() {
  if (!ssl_) return refuse(last_error());
  if (!confirmed_) {
    int r = SSL_do_handshake(ssl_.get());
    if (r != 1) {
      auto e = SSL_get_error(ssl_.get(), r);
      if (e == SSL_ERROR_WANT_READ) {
        wants_ = POLLIN;
        return step::more;
      }
      if (e == SSL_ERROR_WANT_WRITE) {
        wants_ = POLLOUT;
        return step::more;
      }
      return refuse(handshake_error(ssl_.get(), r));
    }
    confirmed_ = true;
  }
  std::size_t n = 0;
  switch (write_some(ssl_.get(), &confirmation, 1, n)) {
    case io::ok: return step::passed;
    case io::want_read: wants_ = POLLIN; return step::more;
    case io::want_write: wants_ = POLLOUT; return step::more;
    default: return refuse("the connection broke after the handshake");
  }
}

namespace {

// What SSL_read or SSL_write's result `r` means for the caller.
io outcome(SSL* s, int r, std::size_t& n) {
  if (r > 0) {
    n = static_cast<std::size_t>(r);
    return io::ok;
  }
  switch (SSL_get_error(s, r)) {
    case SSL_ERROR_WANT_READ: return io::want_read;
    case SSL_ERROR_WANT_WRITE: return io::want_write;
    case SSL_ERROR_ZERO_RETURN: return io::closed;
    default: ERR_clear_error(); return io::failed;
  }
}

} // namespace

io read_some(SSL* s, void* data, std::size_t len, std::size_t& n) {
  n = 0;
  return outcome(s, SSL_read(s, data, static_cast<int>(std::min<std::size_t>(len, 1 << 30))), n);
}

io write_some(SSL* s, const void* data, std::size_t len, std::size_t& n) {
  n = 0;
  return outcome(s, SSL_write(s, data, static_cast<int>(std::min<std::size_t>(len, 1 << 30))), n);
}

} // namespace abg::msg::tls
