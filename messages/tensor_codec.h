// Tensors as Cap'n Proto frames (messages/tensor.capnp), chunked well below the
// 64 MiB Cap'n Proto reader limit. Every frame is validated before use: a
// truncated or hostile frame is an error, never undefined behaviour.
#pragma once

#include <cstddef>
#include <cstdint>
#include <expected>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace abg::msg {

/// A dense row-major float32 tensor. The data is shared and never modified
/// after it is sent: in one process, messages share it without copying.
struct tensor {
  std::vector<int64_t> shape;
  std::shared_ptr<const float> data; // `count` elements (null when empty)
  std::size_t count = 0;

  std::size_t numel() const { return count; }
  std::span<const float> values() const { return {data.get(), count}; }

  /// Takes the vector's elements.
  static tensor make(std::vector<int64_t> shape, std::vector<float> values) {
    auto owner = std::make_shared<std::vector<float>>(std::move(values));
    const auto n = owner->size();
    const float* p = owner->data();
    return {std::move(shape), std::shared_ptr<const float>(std::move(owner), p), n};
  }
  /// Storage for n elements, uninitialised (large ones in transparent huge
  /// pages, as tables are): write them through `out` before the tensor is shared.
  static tensor allocate(std::vector<int64_t> shape, std::size_t n, float*& out);
  /// n elements at p, kept alive by `owner` (no copy).
  static tensor view(std::vector<int64_t> shape, std::shared_ptr<const void> owner, const float* p, std::size_t n) {
    return {std::move(shape), std::shared_ptr<const float>(std::move(owner), p), n};
  }
};

bool operator==(const tensor& a, const tensor& b);

/// Default and maximum frame payloads.
inline constexpr std::size_t kDefaultChunkBytes = std::size_t{8} << 20;   // 8 MiB
inline constexpr std::size_t kMaxChunkBytes = std::size_t{32} << 20;      // 32 MiB
/// Largest frame a decoder accepts: a chunk and its Cap'n Proto framing.
inline constexpr std::size_t kMaxFrameBytes = kMaxChunkBytes + 4096;
/// Largest tensor a decoder accepts (elements).
inline constexpr uint64_t kMaxElements = uint64_t{1} << 36;
inline constexpr std::size_t kMaxDims = 8;

using frame = std::vector<uint8_t>;

/// Encodes `t` into frames of at most `max_chunk_bytes` of payload each
/// (clamped to [4, kMaxChunkBytes]). A tensor with no elements gives one frame.
/// Fails if the shape does not match the data size.
std::expected<std::vector<frame>, std::string> encode_tensor(const tensor& t,
                                                             std::size_t max_chunk_bytes = kDefaultChunkBytes);

/// Reassembles frames arriving in order; validates each one.
class tensor_assembler {
public:
  /// Adds the next frame. Returns true when the tensor is complete.
  std::expected<bool, std::string> add(std::span<const uint8_t> bytes);
  bool complete() const { return complete_; }
  /// The finished tensor (only once complete()).
  tensor take();

private:
  bool started_ = false;
  bool complete_ = false;
  bool failed_ = false;
  std::vector<int64_t> shape_;
  uint64_t total_ = 0;
  uint32_t chunk_count_ = 0;
  uint32_t next_chunk_ = 0;
  uint64_t next_offset_ = 0;
  std::vector<float> values_;
};

/// Decodes a whole tensor from its frames.
std::expected<tensor, std::string> decode_tensor(std::span<const frame> frames);

/// Number of elements of `shape`, or an error when negative, too many dims or too large.
std::expected<uint64_t, std::string> checked_numel(std::span<const int64_t> shape);

}  // namespace abg::msg
