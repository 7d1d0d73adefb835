#include "messages/admin_proof.h"

#include <array>
#include <vector>

#include <openssl/evp.h>
#include <openssl/hmac.h>

namespace abg::msg::admin {

namespace {

constexpr std::string_view label = "abg admin v1";

std::string hex(std::span<const std::uint8_t> bytes) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (auto b : bytes) {
    out += digits[b >> 4];
    out += digits[b & 15];
  }
  return out;
}

} // namespace

std::optional<std::string> fresh_nonce_hex() {
  std::array<std::uint8_t, handshake::nonce_bytes> n{};
  if (!handshake::fresh_nonce(n)) return std::nullopt;
  return hex(n);
}

std::string proof_hex(handshake::key_view key, std::string_view nonce_hex, std::string_view command) {
  // label | nonce | command; the nonce has a fixed length, so the parts cannot run into each other.
  std::vector<std::uint8_t> data;
  data.reserve(label.size() + nonce_hex.size() + command.size());
  for (auto part : {label, nonce_hex, command}) data.insert(data.end(), part.begin(), part.end());
  std::array<std::uint8_t, handshake::mac_bytes> mac{};
  unsigned int len = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), data.data(), data.size(), mac.data(), &len);
  return hex(mac);
}

bool verify(handshake::key_view key, std::string_view nonce_hex, std::string_view command, std::string_view proof) {
  const auto expected = proof_hex(key, nonce_hex, command);
  return handshake::same_mac({reinterpret_cast<const std::uint8_t*>(expected.data()), expected.size()},
                             {reinterpret_cast<const std::uint8_t*>(proof.data()), proof.size()});
}

} // namespace abg::msg::admin
