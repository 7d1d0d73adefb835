#include "messages/tensor_codec.h"

#include <algorithm>
#include <bit>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <new>

#include <sys/mman.h>

#include <capnp/message.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <capnp/serialize.h>
#include <kj/exception.h>

#include "abg/storage/host_memory.h"
#include "messages/tensor.capnp.h"

static_assert(std::endian::native == std::endian::little, "the tensor codec assumes a little-endian host");

namespace abg::msg {

tensor tensor::allocate(std::vector<int64_t> shape, std::size_t n, float*& out) {
  // Filling fresh memory costs a page fault per page: 2 MiB pages make those
  // few (see runtime/model/table_memory.cpp).
  constexpr std::size_t huge_page = std::size_t{2} << 20;
  const std::size_t bytes = n * sizeof(float);
  std::shared_ptr<float> owner;
  if (bytes >= huge_page) {
    const auto rounded = (bytes + huge_page - 1) / huge_page * huge_page;
    void* p = std::aligned_alloc(huge_page, rounded);
    if (p == nullptr) throw std::bad_alloc();
    (void)::madvise(p, rounded, MADV_HUGEPAGE); // advice only
    owner.reset(static_cast<float*>(p), [](float* q) { std::free(q); });
  } else {
    owner.reset(new float[std::max<std::size_t>(n, 1)], std::default_delete<float[]>());
  }
  out = owner.get();
  return {std::move(shape), std::shared_ptr<const float>(std::move(owner)), n};
}

bool operator==(const tensor& a, const tensor& b) {
  if (a.shape != b.shape || a.numel() != b.numel()) return false;
  if (a.numel() == 0) return true;
  return std::memcmp(a.data.get(), b.data.get(), a.numel() * sizeof(float)) == 0;
}

std::expected<uint64_t, std::string> checked_numel(std::span<const int64_t> shape) {
  if (shape.size() > kMaxDims) return std::unexpected("tensor has more than 8 dimensions");
  uint64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) return std::unexpected("tensor has a negative dimension");
    if (d != 0 && n > kMaxElements / static_cast<uint64_t>(d)) return std::unexpected("tensor is too large");
    n *= static_cast<uint64_t>(d);
  }
  if (n > kMaxElements) return std::unexpected("tensor is too large");
  return n;
}

std::expected<std::vector<frame>, std::string> encode_tensor(const tensor& t, std::size_t max_chunk_bytes) {
  auto n = checked_numel(t.shape);
  if (!n) return std::unexpected(n.error());
  if (*n != t.numel()) return std::unexpected("tensor shape does not match its data size");
  const std::size_t per_chunk =
      std::max<std::size_t>(1, std::clamp<std::size_t>(max_chunk_bytes, 4, kMaxChunkBytes) / sizeof(float));
  const uint64_t chunks64 = std::max<uint64_t>(1, (*n + per_chunk - 1) / per_chunk);
  if (chunks64 > std::numeric_limits<uint32_t>::max()) return std::unexpected("tensor needs too many chunks");
  const auto chunks = static_cast<uint32_t>(chunks64);
  std::vector<frame> out;
  out.reserve(chunks);
  for (uint32_t c = 0; c < chunks; ++c) {
    const uint64_t offset = uint64_t{c} * per_chunk;
    const uint64_t count = std::min<uint64_t>(per_chunk, *n - offset);
    const std::size_t bytes = static_cast<std::size_t>(count) * sizeof(float);
    capnp::MallocMessageBuilder builder(static_cast<unsigned>(bytes / sizeof(capnp::word) + 64));
    auto f = builder.initRoot<TensorFrame>();
    f.setDtype(DType::FLOAT32);
    auto shape = f.initShape(static_cast<unsigned>(t.shape.size()));
    for (std::size_t d = 0; d < t.shape.size(); ++d) shape.set(static_cast<unsigned>(d), t.shape[d]);
    f.setTotalElements(*n);
    f.setChunkIndex(c);
    f.setChunkCount(chunks);
    f.setOffset(offset);
    auto data = f.initData(static_cast<unsigned>(bytes));
    if (bytes != 0) std::memcpy(data.begin(), t.data.get() + offset, bytes);
    auto words = capnp::messageToFlatArray(builder);
    auto raw = words.asBytes();
    out.emplace_back(raw.begin(), raw.end());
  }
  return out;
}

std::expected<bool, std::string> tensor_assembler::add(std::span<const uint8_t> bytes) {
  auto fail = [this](std::string why) -> std::expected<bool, std::string> {
    failed_ = true;
    return std::unexpected("tensor frame: " + why);
  };
  if (failed_) return fail("assembler already failed");
  if (complete_) return fail("frame after the last one");
  if (bytes.size() % sizeof(capnp::word) != 0) return fail("size is not a multiple of 8");
  if (bytes.size() > kMaxFrameBytes) return fail("frame too large");
  if (bytes.empty()) return fail("empty frame");
  // Copy into word-aligned memory: the network buffer need not be aligned.
  kj::Array<capnp::word> words = kj::heapArray<capnp::word>(bytes.size() / sizeof(capnp::word));
  std::memcpy(words.begin(), bytes.data(), bytes.size());
  try {
    capnp::ReaderOptions options;
    options.traversalLimitInWords = words.size() + 16;
    options.nestingLimit = 8;
    capnp::FlatArrayMessageReader reader(words.asPtr(), options);
    if (reader.getEnd() != words.end()) return fail("trailing bytes");
    auto f = reader.getRoot<TensorFrame>();
    if (f.getDtype() != DType::FLOAT32) return fail("unsupported dtype");
    auto shape_list = f.getShape();
    if (shape_list.size() > kMaxDims) return fail("too many dimensions");
    std::vector<int64_t> shape;
    shape.reserve(shape_list.size());
    for (int64_t d : shape_list) shape.push_back(d);
    auto n = checked_numel(shape);
    if (!n) return fail(n.error());
    if (f.getTotalElements() != *n) return fail("element count does not match the shape");
    const uint32_t count = f.getChunkCount();
    if (count == 0 || f.getChunkIndex() >= count) return fail("bad chunk index");
    if (!started_) {
      if (f.getChunkIndex() != 0) return fail("first frame is not chunk 0");
      if (count > *n + 1) return fail("more chunks than elements");
      // The claim is checked against what this process may still take before
      // anything is allocated for it; the values then grow with the data that
      // actually arrives, never by the claim.
      if (*n * sizeof(float) > kMaxChunkBytes)
        if (auto room = storage::check_allocation(
              fmt::format("a tensor of shape [{}]", fmt::join(shape, ", ")), *n * sizeof(float));
            !room)
          return fail(room.error().message);
      started_ = true;
      shape_ = shape;
      total_ = *n;
      chunk_count_ = count;
    } else if (shape != shape_ || count != chunk_count_) {
      return fail("frame belongs to another tensor");
    }
    if (f.getChunkIndex() != next_chunk_) return fail("chunk out of order");
    if (f.getOffset() != next_offset_) return fail("bad offset");
    auto data = f.getData();
    if (data.size() % sizeof(float) != 0) return fail("data is not whole elements");
    const uint64_t elems = data.size() / sizeof(float);
    if (elems > total_ - next_offset_) return fail("data past the end of the tensor");
    const bool last = next_chunk_ + 1 == chunk_count_;
    if (last && next_offset_ + elems != total_)
      return fail(fmt::format("the last chunk ends at element {} of the {} the shape claims", next_offset_ + elems,
                              total_));
    if (!last && elems == 0) return fail("empty chunk");
    const std::size_t old = values_.size();
    values_.resize(old + static_cast<std::size_t>(elems));
    if (elems != 0) std::memcpy(values_.data() + old, data.begin(), data.size());
    next_offset_ += elems;
    ++next_chunk_;
    complete_ = last;
    return complete_;
  } catch (const kj::Exception& e) {
    return fail(std::string("malformed: ") + e.getDescription().cStr());
  } catch (const std::exception& e) {
    return fail(std::string("malformed: ") + e.what());
  }
}

tensor tensor_assembler::take() {
  if (!complete_) return {};
  complete_ = false;
  failed_ = true;  // an assembler makes one tensor
  return tensor::make(std::move(shape_), std::move(values_));
}

std::expected<tensor, std::string> decode_tensor(std::span<const frame> frames) {
  tensor_assembler a;
  for (const auto& f : frames) {
    auto r = a.add(f);
    if (!r) return std::unexpected(r.error());
  }
  if (!a.complete()) return std::unexpected("tensor frames: missing chunks");
  return a.take();
}

}  // namespace abg::msg
