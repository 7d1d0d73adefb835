// The generator's random numbers: SplitMix64 (Steele, Lea and Flood, 2014),
// tiny, fast and good enough for sampling a graph, and cheap to seed per
// block so that every block of a generated graph is independent of the others
// and of how many threads made it.
#pragma once

#include <cstdint>

namespace abg::generate {

/// SplitMix64's output function: a bijective 64-bit mix.
constexpr std::uint64_t mix64(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

class splitmix64 {
public:
  explicit constexpr splitmix64(std::uint64_t seed) : state_(seed) {}
  /// The stream of (seed, index): streams of different indices do not overlap in practice.
  static constexpr splitmix64 stream(std::uint64_t seed, std::uint64_t index) {
    return splitmix64(mix64(seed ^ mix64(index + 0x9e3779b97f4a7c15ULL)));
  }
  constexpr std::uint64_t next() { return mix64(state_ += 0x9e3779b97f4a7c15ULL); }
  /// Uniform in [0, 1), 53 bits.
  constexpr double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

private:
  std::uint64_t state_;
};

} // namespace abg::generate
