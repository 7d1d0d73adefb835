#include "abg/storage/bucket_file.h"

#include <bit>
#include <cerrno>
#include <cstddef>
#include <cstring>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace abg::storage {

namespace fs = std::filesystem;

namespace {

constexpr char bucket_magic[8] = {'A', 'B', 'G', 'E', 'D', 'G', 'E', '\0'};
constexpr std::uint32_t flag_has_weights = 1;

// On-disk header, little-endian (x86-64 and aarch64 Linux only; checked below).
struct raw_header {
  char magic[8];
  std::uint32_t format_version;
  std::uint32_t id_width;
  std::uint8_t dataset[16];
  std::uint64_t edge_count;
  std::uint32_t flags;
  std::uint32_t reserved;
  std::uint64_t payload_checksum;
  std::uint64_t header_checksum; // of the 56 bytes before it
};
static_assert(sizeof(raw_header) == bucket_header_size);
static_assert(std::endian::native == std::endian::little, "abg files are little-endian");

std::uint64_t header_sum(const raw_header& h) {
  return checksum(std::span(reinterpret_cast<const std::byte*>(&h), offsetof(raw_header, header_checksum)));
}

expected<void> pwrite_all(int fd, const std::byte* data, std::size_t size, std::uint64_t offset,
                          const fs::path& path) {
  while (size > 0) {
    auto n = ::pwrite(fd, data, size, static_cast<off_t>(offset));
    if (n < 0) {
      if (errno == EINTR)
        continue;
      return fail("cannot write {}: {}", path.string(), std::strerror(errno));
    }
    data += n;
    size -= static_cast<std::size_t>(n);
    offset += static_cast<std::uint64_t>(n);
  }
  return {};
}

} // namespace

std::uint64_t bucket_layout::column_offset(int column) const {
  return bucket_header_size + static_cast<std::uint64_t>(column) * edge_count * id_width;
}

std::uint64_t bucket_layout::file_size() const {
  return column_offset(3) + (has_weights ? edge_count * sizeof(float) : 0);
}

std::string bucket_file_name(std::int64_t lhs, std::int64_t rhs) {
  return fmt::format("edges_{}_{}.abgb", lhs, rhs);
}

expected<bucket_writer> bucket_writer::create(fs::path path, const dataset_id& id, bucket_layout layout,
                                              std::size_t buffer_edges) {
  if (layout.id_width != 4 && layout.id_width != 8)
    return fail("internal: id width {} is not 4 or 8", layout.id_width);
  bucket_writer w;
  w.tmp_ = temporary_path_for(path);
  w.path_ = std::move(path);
  w.id_ = id;
  w.layout_ = layout;
  w.buffer_edges_ = std::max<std::size_t>(1, buffer_edges);
  w.fd_ = ::open(w.tmp_.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (w.fd_ < 0)
    return fail("cannot create {}: {}", w.tmp_.string(), std::strerror(errno));
  if (::ftruncate(w.fd_, static_cast<off_t>(layout.file_size())) != 0)
    return fail("cannot size {} to {} bytes: {}", w.tmp_.string(), layout.file_size(), std::strerror(errno));
  for (int c = 0; c < 4; ++c)
    w.buffers_[c].resize(w.buffer_edges_ * (c == 3 ? sizeof(float) : layout.id_width));
  return w;
}

bucket_writer::bucket_writer(bucket_writer&& other) noexcept
  : path_(std::move(other.path_)), tmp_(std::move(other.tmp_)), id_(other.id_), layout_(other.layout_),
    fd_(std::exchange(other.fd_, -1)), buffer_edges_(other.buffer_edges_), pending_(other.pending_),
    written_(other.written_) {
  for (int c = 0; c < 4; ++c)
    buffers_[c] = std::move(other.buffers_[c]);
}

bucket_writer& bucket_writer::operator=(bucket_writer&& other) noexcept {
  if (this != &other) {
    this->~bucket_writer();
    new (this) bucket_writer(std::move(other));
  }
  return *this;
}

bucket_writer::~bucket_writer() {
  if (fd_ >= 0) {
    ::close(fd_);
    ::unlink(tmp_.c_str());
  }
}

expected<void> bucket_writer::flush() {
  if (pending_ == 0)
    return {};
  if (written_ + pending_ > layout_.edge_count)
    return fail("internal: more edges than announced for {}", path_.string());
  for (int c = 0; c < (layout_.has_weights ? 4 : 3); ++c) {
    std::size_t width = c == 3 ? sizeof(float) : layout_.id_width;
    auto ok = pwrite_all(fd_, buffers_[c].data(), pending_ * width, layout_.column_offset(c) + written_ * width,
                         tmp_);
    if (!ok)
      return ok;
  }
  written_ += pending_;
  pending_ = 0;
  return {};
}

expected<std::uint64_t> bucket_writer::commit() {
  if (auto ok = flush(); !ok)
    return std::unexpected(ok.error());
  if (written_ != layout_.edge_count)
    return fail("internal: {} edges written to {}, {} announced", written_, path_.string(), layout_.edge_count);
  raw_header h{};
  std::memcpy(h.magic, bucket_magic, sizeof h.magic);
  h.format_version = bucket_format_version;
  h.id_width = layout_.id_width;
  std::memcpy(h.dataset, id_.bytes.data(), 16);
  h.edge_count = layout_.edge_count;
  h.flags = layout_.has_weights ? flag_has_weights : 0;
  // The payload was written through pwrite; read it back through a mapping
  // (still in the page cache) to checksum exactly what the file holds.
  auto payload_size = layout_.file_size() - bucket_header_size;
  if (payload_size > 0) {
    void* map = ::mmap(nullptr, layout_.file_size(), PROT_READ, MAP_SHARED, fd_, 0);
    if (map == MAP_FAILED)
      return fail("cannot map {}: {}", tmp_.string(), std::strerror(errno));
    h.payload_checksum =
      checksum(std::span(static_cast<const std::byte*>(map) + bucket_header_size, payload_size));
    ::munmap(map, layout_.file_size());
  } else {
    h.payload_checksum = checksum(std::string_view());
  }
  h.header_checksum = header_sum(h);
  if (auto ok = pwrite_all(fd_, reinterpret_cast<const std::byte*>(&h), sizeof h, 0, tmp_); !ok)
    return std::unexpected(ok.error());
  if (::fsync(fd_) != 0)
    return fail("cannot sync {}: {}", tmp_.string(), std::strerror(errno));
  ::close(std::exchange(fd_, -1));
  if (::rename(tmp_.c_str(), path_.c_str()) != 0)
    return fail("cannot rename {} to {}: {}", tmp_.string(), path_.string(), std::strerror(errno));
  return h.payload_checksum;
}

expected<bucket_reader> bucket_reader::open(const fs::path& path, const dataset_id* expected_id) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return fail("cannot open bucket file {}: {}", path.string(), std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    return fail("cannot stat {}: {}", path.string(), std::strerror(errno));
  }
  auto size = static_cast<std::uint64_t>(st.st_size);
  auto damaged = [&](std::string_view what) {
    return fail("bucket file {} is {}; re-run `abg import` for this edge path", path.string(), what);
  };
  if (size < bucket_header_size) {
    ::close(fd);
    return damaged(fmt::format("truncated: {} bytes, shorter than its {}-byte header", size, bucket_header_size));
  }
  void* map = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
  ::close(fd);
  if (map == MAP_FAILED)
    return fail("cannot map {}: {}", path.string(), std::strerror(errno));
  std::shared_ptr<const std::byte> mapping(static_cast<const std::byte*>(map),
                                           [size](const std::byte* p) { ::munmap(const_cast<std::byte*>(p), size); });
  raw_header h;
  std::memcpy(&h, map, sizeof h);
  if (std::memcmp(h.magic, bucket_magic, sizeof h.magic) != 0)
    return damaged("not an abg bucket file (bad magic)");
  if (h.format_version != bucket_format_version)
    return fail("bucket file {} has format version {}, this abg reads version {}; re-run `abg import`",
                path.string(), h.format_version, bucket_format_version);
  if (h.header_checksum != header_sum(h))
    return damaged("corrupt (header checksum mismatch)");
  if (h.id_width != 4 && h.id_width != 8)
    return damaged(fmt::format("corrupt (id width {})", h.id_width));
  // Bounded by the file before any size is computed from it: a huge count
  // would wrap the size computation below round to the file's own size.
  if (h.edge_count > (size - bucket_header_size) / (3 * std::uint64_t{h.id_width}))
    return damaged(fmt::format("truncated: {} bytes cannot hold the {} edges its header announces", size,
                               h.edge_count));
  bucket_reader r;
  r.layout_ = {h.edge_count, h.id_width, (h.flags & flag_has_weights) != 0};
  std::memcpy(r.id_.bytes.data(), h.dataset, 16);
  if (size != r.layout_.file_size())
    return damaged(fmt::format("{}: {} bytes, its header announces {} edges = {} bytes",
                               size < r.layout_.file_size() ? "truncated" : "oversized", size, h.edge_count,
                               r.layout_.file_size()));
  r.checksum_ = storage::checksum(std::span(mapping.get() + bucket_header_size, size - bucket_header_size));
  if (r.checksum_ != h.payload_checksum)
    return damaged("corrupt (payload checksum mismatch)");
  if (expected_id && *expected_id != r.id_)
    return fail("bucket file {} was made from dataset {}, but the entity path is dataset {}; it belongs to "
                "another entity path: re-import this edge path",
                path.string(), r.id_.hex(), expected_id->hex());
  r.map_ = std::move(mapping);
  return r;
}

} // namespace abg::storage
