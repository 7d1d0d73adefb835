// A seeded pseudo-random permutation of [0, n) in constant memory: a 4-round
// Feistel network over the smallest even number of bits that covers n, with
// cycle-walking (values >= n are permuted again until they fall below n; the
// domain is less than 4n, so a few rounds on average). The generator uses it
// to scatter popular ranks over entity ids, so that ids say nothing about
// degree.
#pragma once

#include <cstdint>

#include "abg/generate/random.h"

namespace abg::generate {

class permutation {
public:
  /// n >= 1.
  permutation(std::uint64_t n, std::uint64_t seed) : n_(n) {
    int bits = 2;
    while (bits < 64 && (std::uint64_t{1} << bits) < n)
      bits += 2;
    half_ = bits / 2;
    mask_ = (std::uint64_t{1} << half_) - 1; // half_ >= 1: the shift by 64 - half_ stays below 64
    for (int r = 0; r < 4; ++r)
      keys_[r] = mix64(seed + 0x632be59bd9b4e019ULL * static_cast<std::uint64_t>(r + 1));
  }

  std::uint64_t operator()(std::uint64_t x) const {
    do
      x = round_trip(x);
    while (x >= n_);
    return x;
  }

  std::uint64_t size() const { return n_; }

private:
  std::uint64_t round_trip(std::uint64_t x) const {
    std::uint64_t left = x >> half_, right = x & mask_;
    for (auto key : keys_) {
      // One multiply per round (the top bits of a multiplicative hash): ids
      // only need scattering, and this is the generator's inner loop.
      const std::uint64_t next = left ^ ((((right ^ key) + key) * 0x9e3779b97f4a7c15ULL) >> (64 - half_));
      left = right;
      right = next;
    }
    return (left << half_) | right;
  }

  std::uint64_t n_;
  int half_ = 1;
  std::uint64_t mask_ = 1;
  std::uint64_t keys_[4]{};
};

} // namespace abg::generate
