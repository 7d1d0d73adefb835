#include "messages/handshake.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <poll.h>
#include <sys/socket.h>

#include <fmt/format.h>

namespace abg::msg::handshake {

namespace {

constexpr std::uint8_t version = 1;
constexpr std::array<char, 4> magic{'A', 'B', 'G', 'H'};

using nonce = std::array<std::uint8_t, nonce_bytes>;
using mac = std::array<std::uint8_t, mac_bytes>;

mac proof(key_view key, std::string_view label, std::span<const std::uint8_t> first,
          std::span<const std::uint8_t> second) {
  // label | first | second, in a fixed buffer (labels are short; nonces 32 bytes).
  std::array<std::uint8_t, 32 + 2 * nonce_bytes> data{};
  std::size_t n = 0;
  for (auto part : {std::span<const std::uint8_t>(reinterpret_cast<const std::uint8_t*>(label.data()), label.size()),
                    first, second})
    for (auto b : part)
      if (n < data.size()) data[n++] = b;
  mac out{};
  unsigned int len = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), data.data(), n, out.data(), &len);
  return out;
}


// What is wrong with a peer's hello (its first 8 bytes), or "".
std::string check_hello(std::span<const std::uint8_t> h, char side, bool tls) {
  if (!std::equal(magic.begin(), magic.end(), h.begin()))
    return "it does not speak abg's cluster handshake (not an abg node of this version, or not abg at all)";
  if (h[4] != version) return fmt::format("its handshake is version {}, this node's {}", h[4], version);
  if (h[5] != static_cast<std::uint8_t>(side) || h[6] > 1 || h[7] != 0) return "its hello is malformed";
  if ((h[6] == 1) != tls)
    return tls ? "this node uses TLS between nodes and it does not (give every node the same [tls] section)"
               : "it uses TLS between nodes and this node does not (give every node the same [tls] section)";
  return {};
}

using clock_type = std::chrono::steady_clock;

expected<void> wait_for(int fd, short events, clock_type::time_point deadline) {
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock_type::now()).count();
    if (left <= 0) return fail("no answer in time");
    pollfd p{fd, events, 0};
    int r = ::poll(&p, 1, static_cast<int>(std::min<long long>(left, 1000)));
    if (r > 0) return {};
    if (r < 0 && errno != EINTR) return fail("poll failed: {}", std::strerror(errno));
  }
}

expected<void> send_all(int fd, std::span<const std::uint8_t> data, clock_type::time_point deadline) {
  std::size_t sent = 0;
  while (sent < data.size()) {
    auto n = ::send(fd, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
    if (n > 0) {
      sent += static_cast<std::size_t>(n);
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
      if (auto ok = wait_for(fd, POLLOUT, deadline); !ok) return ok;
    } else {
      return fail("the connection broke: {}", std::strerror(errno));
    }
  }
  return {};
}

expected<void> receive_exactly(int fd, std::span<std::uint8_t> data, clock_type::time_point deadline) {
  std::size_t got = 0;
  while (got < data.size()) {
    auto n = ::recv(fd, data.data() + got, data.size() - got, 0);
    if (n > 0) {
      got += static_cast<std::size_t>(n);
    } else if (n == 0) {
      return fail("the peer closed the connection");
    } else if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
      if (auto ok = wait_for(fd, POLLIN, deadline); !ok) return ok;
    } else {
      return fail("the connection broke: {}", std::strerror(errno));
    }
  }
  return {};
}

} // namespace

bool fresh_nonce(std::span<std::uint8_t, nonce_bytes> out) {
  return RAND_bytes(out.data(), static_cast<int>(out.size())) == 1;
}

bool same_mac(std::span<const std::uint8_t> a, std::span<const std::uint8_t> b) {
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

std::array<std::uint8_t, hello_bytes> hello(char side, std::span<const std::uint8_t, nonce_bytes> n, bool tls) {
  std::array<std::uint8_t, hello_bytes> out{};
  std::copy(magic.begin(), magic.end(), out.begin());
  out[4] = version;
  out[5] = static_cast<std::uint8_t>(side);
  out[6] = tls ? 1 : 0;
  std::copy(n.begin(), n.end(), out.begin() + 8);
  return out;
}

expected<void> run_client(int fd, key_view key, bool tls, std::chrono::milliseconds timeout,
                          std::string_view token_source, bool* refused) {
  if (refused) *refused = false;
  const auto deadline = clock_type::now() + timeout;
  nonce mine{};
  if (!fresh_nonce(mine)) return fail("cannot draw a random nonce (OpenSSL's RAND_bytes failed)");
  if (auto ok = send_all(fd, hello('c', mine, tls), deadline); !ok) return ok;
  std::array<std::uint8_t, hello_bytes> theirs{};
  if (auto ok = receive_exactly(fd, theirs, deadline); !ok) return ok;
  if (auto bad = check_hello(theirs, 's', tls); !bad.empty()) {
    if (refused) *refused = (theirs[6] == 1) != tls && std::equal(magic.begin(), magic.end(), theirs.begin());
    return fail("{}", bad);
  }
  auto server_nonce = std::span<const std::uint8_t>(theirs).subspan(8);
  if (auto ok = send_all(fd, proof(key, "abg client v1", server_nonce, mine), deadline); !ok) return ok;
  std::array<std::uint8_t, 1> verdict{};
  if (auto ok = receive_exactly(fd, verdict, deadline); !ok) return ok;
  if (verdict[0] != 1) {
    if (refused) *refused = true;
    return fail("it refused this node: the cluster token did not match (this node's token: {})", token_source);
  }
  mac server_proof{};
  if (auto ok = receive_exactly(fd, server_proof, deadline); !ok) return ok;
  if (!same_mac(server_proof, proof(key, "abg server v1", mine, server_nonce)))
    return fail("it does not hold this cluster's token (its proof is wrong): another cluster's node, or an impostor");
  return {};
}

server::step server::start() {
  if (!fresh_nonce(nonce_)) return refuse("cannot draw a random nonce (OpenSSL's RAND_bytes failed)", false);
  auto h = hello('s', nonce_, tls_);
  // A fresh socket's send buffer takes 40 bytes at once.
  if (::send(fd_, h.data(), h.size(), MSG_NOSIGNAL | MSG_DONTWAIT) != static_cast<ssize_t>(h.size()))
    return refuse("the connection broke before the handshake", false);
  return step::more;
}

server::step server::on_readable() {
  // Never more than the client's message: what follows belongs to BASP or the bulk channel.
  auto n = ::recv(fd_, in_.data() + got_, in_.size() - got_, MSG_DONTWAIT);
  if (n == 0) return refuse("it closed the connection during the handshake", false);
  if (n < 0)
    return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR
             ? step::more
             : refuse(fmt::format("the connection broke during the handshake: {}", std::strerror(errno)), false);
  bool had_hello_head = got_ >= 8;
  got_ += static_cast<std::size_t>(n);
  if (!had_hello_head && got_ >= 8)
    if (auto bad = check_hello(std::span(in_).first(8), 'c', tls_); !bad.empty()) return refuse(bad, false);
  if (got_ < in_.size()) return step::more;
  auto client_nonce = std::span<const std::uint8_t>(in_).subspan(8, nonce_bytes);
  auto client_proof = std::span<const std::uint8_t>(in_).subspan(hello_bytes);
  if (!same_mac(client_proof, proof(key_, "abg client v1", nonce_, client_nonce)))
    return refuse("the cluster token did not match", true);
  std::array<std::uint8_t, verdict_bytes> verdict{};
  verdict[0] = 1;
  auto p = proof(key_, "abg server v1", client_nonce, nonce_);
  std::copy(p.begin(), p.end(), verdict.begin() + 1);
  if (::send(fd_, verdict.data(), verdict.size(), MSG_NOSIGNAL | MSG_DONTWAIT) != static_cast<ssize_t>(verdict.size()))
    return refuse("the connection broke at the end of the handshake", false);
  return step::passed;
}

server::step server::refuse(std::string why, bool tell) {
  why_ = std::move(why);
  if (tell) {
    std::uint8_t no = 0;
    [[maybe_unused]] auto n = ::send(fd_, &no, 1, MSG_NOSIGNAL | MSG_DONTWAIT);
  }
  return step::refused;
}

} // namespace abg::msg::handshake
