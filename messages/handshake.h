// The cluster-token handshake (docs/security.md), the one protocol of
// abg's own besides the bulk channel: on every connection between nodes it
// runs before any other byte, so that BASP (CAF's protocol, which has no
// authentication hook) and the bulk channel only ever see peers that hold
// the cluster's token.
//
//   both sides  -> hello: "ABGH", version, side, TLS (0 or 1), a zero byte, 32-byte nonce
//   client      -> proof: HMAC-SHA256(token, "abg client v1" | server nonce | client nonce)
//   server      -> verdict: 1 and HMAC-SHA256(token, "abg server v1" | client nonce | server nonce),
//                  or 0 (the token did not match) and the connection closed
//
// Fresh nonces from both sides make every proof single-use; the labels keep
// a proof from being reflected back; the server's proof tells the client it
// reached a node of its own cluster. The TLS byte says whether the sender
// goes on with TLS (messages/tls.h): both must agree, so a plaintext node
// and a TLS node part at once with a message saying so. Nothing is read past the handshake's
// last byte, so the socket goes on to BASP or the bulk channel intact.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "abg/error.h"

namespace abg::msg::handshake {

inline constexpr std::size_t nonce_bytes = 32;
inline constexpr std::size_t mac_bytes = 32;
inline constexpr std::size_t hello_bytes = 8 + nonce_bytes;
/// What a server reads from a client: hello and proof.
inline constexpr std::size_t client_bytes = hello_bytes + mac_bytes;
inline constexpr std::size_t verdict_bytes = 1 + mac_bytes;

using key_view = std::span<const std::uint8_t>;

/// The client side, blocking (poll) on a connected socket: sends hello and
/// proof, checks the verdict and the server's proof. Fails (lost_peer unset)
/// when the server refused the token or the two disagree on TLS, when the
/// peer does not speak this handshake, or after `timeout`; `refused` is set
/// in the first two cases (trying again cannot help). `token_source` names
/// the token in the refusal's message.
expected<void> run_client(int fd, key_view key, bool tls, std::chrono::milliseconds timeout,
                          std::string_view token_source, bool* refused = nullptr);

/// The server side of one connection, driven by a caller that polls many
/// (actors/node/gate.h): start() sends the hello, each readable event calls
/// on_readable() until it answers passed or refused. Non-blocking socket.
class server {
public:
  enum class step { more, passed, refused };

  server(int fd, key_view key, bool tls) : fd_(fd), key_(key), tls_(tls) {}

  /// Sends the server's hello; refused when the socket does not take it.
  step start();
  /// Reads what arrived; on a complete client message answers the verdict.
  step on_readable();
  /// Why it was refused (after refused).
  const std::string& why() const { return why_; }

private:
  step refuse(std::string why, bool tell);

  int fd_;
  key_view key_;
  bool tls_;
  std::array<std::uint8_t, nonce_bytes> nonce_{};
  std::array<std::uint8_t, client_bytes> in_{};
  std::size_t got_ = 0;
  std::string why_;
};

/// Fills `out` from OpenSSL's RAND_bytes; false when it failed.
bool fresh_nonce(std::span<std::uint8_t, nonce_bytes> out);
/// Constant-time equality (of MACs).
bool same_mac(std::span<const std::uint8_t> a, std::span<const std::uint8_t> b);

/// The hello of `side` ('c' or 's') with `nonce`; exposed for tests.
std::array<std::uint8_t, hello_bytes> hello(char side, std::span<const std::uint8_t, nonce_bytes> nonce,
                                            bool tls = false);

} // namespace abg::msg::handshake
