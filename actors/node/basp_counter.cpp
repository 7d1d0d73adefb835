#include "actors/node/basp_counter.h"

#include <algorithm>
#include <cstring>

#include <caf/io/basp/header.hpp>
#include <caf/io/basp/message_type.hpp>

#include "actors/role_traffic.h"

namespace abg::actors {

static_assert(basp_counter::header_bytes == caf::io::basp::header_size, "CAF's BASP header changed size");
static_assert(role_traffic::direct_message == static_cast<std::uint8_t>(caf::io::basp::message_type::direct_message));
static_assert(role_traffic::routed_message == static_cast<std::uint8_t>(caf::io::basp::message_type::routed_message));

namespace {

// A big-endian (network order) integer of `n` bytes at `p`.
std::uint64_t big_endian(const unsigned char* p, std::size_t n) {
  std::uint64_t v = 0;
  for (std::size_t i = 0; i < n; ++i) v = v << 8 | p[i];
  return v;
}

} // namespace

std::uint64_t basp_counter::feed(const void* bytes, std::size_t n,
                                 const std::function<void(const basp_message&)>& seen) {
  const auto* p = static_cast<const unsigned char*>(bytes);
  std::uint64_t messages = 0;
  while (n > 0) {
    if (skip_ > 0) {
      const auto k = static_cast<std::size_t>(std::min<std::uint64_t>(skip_, n));
      skip_ -= k, p += k, n -= k;
      continue;
    }
    const auto k = std::min(header_bytes - have_, n);
    std::memcpy(header_.data() + have_, p, k);
    have_ += k, p += k, n -= k;
    if (have_ < header_bytes) break;
    have_ = 0;
    ++messages;
    skip_ = big_endian(header_.data() + 4, 4);
    if (seen)
      seen({header_[0], big_endian(header_.data() + 16, 8), big_endian(header_.data() + 24, 8), header_bytes + skip_});
  }
  return messages;
}

} // namespace abg::actors
