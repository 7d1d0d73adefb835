#include "actors/node/basp_counter.h"

#include <algorithm>
#include <cstring>

#include <caf/io/basp/header.hpp>

namespace abg::actors {

static_assert(basp_counter::header_bytes == caf::io::basp::header_size, "CAF's BASP header changed size");

std::uint64_t basp_counter::feed(const void* bytes, std::size_t n) {
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
    skip_ = std::uint64_t{header_[4]} << 24 | std::uint64_t{header_[5]} << 16 | std::uint64_t{header_[6]} << 8 |
            std::uint64_t{header_[7]};
  }
  return messages;
}

} // namespace abg::actors
