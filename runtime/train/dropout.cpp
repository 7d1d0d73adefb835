// Counter-based masks (see dropout.h): a 64-bit mix for each row's key, and
// a 32-bit integer hash (murmur3's finaliser) of (key, element) that
// vectorises, so a mask costs a few instructions per element and no state.
#include "runtime/train/dropout.h"

#include "runtime/train/fused_math.h"

namespace abg::train {

std::uint32_t dropout_key(std::uint64_t seed, dropout_stream stream, std::uint64_t row) {
  std::uint64_t x = seed * 0x9E3779B97F4A7C15ull + (static_cast<std::uint64_t>(stream) + 1) * 0xBF58476D1CE4E5B9ull +
                    row * 0x94D049BB133111EBull;
  x ^= x >> 31;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 29;
  return static_cast<std::uint32_t>(x ^ (x >> 32));
}

ABG_MULTIVERSION void dropout_row(const float* in, float* out, int d, std::uint32_t key, float p) {
  // kept when the hash's top 24 bits are at or above p·2^24
  const auto threshold = static_cast<std::uint32_t>(p * 16777216.0f);
  const float scale = 1.0f / (1.0f - p);
#pragma omp simd
  for (int i = 0; i < d; ++i) {
    std::uint32_t x = key ^ (static_cast<std::uint32_t>(i) * 0x9E3779B9u);
    x ^= x >> 16;
    x *= 0x85EBCA6Bu;
    x ^= x >> 13;
    x *= 0xC2B2AE35u;
    x ^= x >> 16;
    out[i] = (x >> 8) >= threshold ? in[i] * scale : 0.0f;
  }
}

} // namespace abg::train
