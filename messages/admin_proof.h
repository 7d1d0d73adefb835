// Steering a run from `abg console --admin` (docs/console.md, "Steering a
// run"): every command carries a proof that the console holds the run's
// admin token, an HMAC over a nonce the inspector handed out for it, so the
// admin token never crosses the network and a recorded proof is useless.
//
//   console   -> inspector: challenge          <- a fresh nonce (hex), good once, for a minute
//   console   -> inspector: admin, COMMAND, nonce, HMAC-SHA256(admin token, "abg admin v1" | nonce | COMMAND) (hex)
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "messages/handshake.h"

namespace abg::msg::admin {

/// A fresh nonce as hex; none when OpenSSL's RAND_bytes failed.
std::optional<std::string> fresh_nonce_hex();

/// The proof of `command` for `nonce_hex` under `key`, as hex.
std::string proof_hex(handshake::key_view key, std::string_view nonce_hex, std::string_view command);

/// Whether `proof` is the proof of `command` for `nonce_hex` (constant time).
bool verify(handshake::key_view key, std::string_view nonce_hex, std::string_view command, std::string_view proof);

} // namespace abg::msg::admin
