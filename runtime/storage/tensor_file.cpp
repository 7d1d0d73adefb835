#include "abg/storage/tensor_file.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cstddef>
#include <cerrno>
#include <cstring>
#include <limits>
#include <utility>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace abg::storage {

namespace fs = std::filesystem;

namespace {

constexpr char tensor_magic[8] = {'A', 'B', 'G', 'T', 'E', 'N', 'S', '\0'};
constexpr std::uint32_t dtype_float32 = 1;

// The on-disk header, byte for byte (little-endian; see docs/formats.md).
struct raw_header {
  char magic[8];
  std::uint32_t format_version;
  std::uint32_t dtype;
  std::uint8_t dataset[16];
  std::uint32_t rank;
  std::uint32_t reserved;
  std::int64_t shape[tensor_max_rank];
  std::uint64_t payload_bytes;
  std::uint64_t payload_checksum;
  std::uint64_t header_checksum; // XXH3-64 of the 120 bytes before it
};
static_assert(sizeof(raw_header) == tensor_header_size);
static_assert(offsetof(raw_header, header_checksum) == 120);
static_assert(std::endian::native == std::endian::little, "abg files are little-endian");

std::uint64_t header_sum(const raw_header& h) {
  return checksum(std::string_view(reinterpret_cast<const char*>(&h), offsetof(raw_header, header_checksum)));
}

std::span<const std::byte> bytes_of(std::span<const float> data) {
  return std::as_bytes(data);
}

// Reads exactly out.size() bytes at `offset` (the file size was checked before).
expected<void> pread_all(int fd, const fs::path& path, std::span<std::byte> out, std::uint64_t offset) {
  while (!out.empty()) {
    auto n = ::pread(fd, out.data(), out.size(), static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      return fail("cannot read {}: {}", path.string(), std::strerror(errno));
    if (n == 0)
      return fail("{}: truncated while reading (file shrank?)", path.string());
    out = out.subspan(static_cast<std::size_t>(n));
    offset += static_cast<std::uint64_t>(n);
  }
  return {};
}

// An open file descriptor closed on scope exit.
struct fd_guard {
  int fd;
  ~fd_guard() {
    if (fd >= 0)
      ::close(fd);
  }
};

expected<tensor_header> validate_header(int fd, const fs::path& path, const dataset_id& expected_dataset) {
  auto name = path.string();
  struct stat st{};
  if (::fstat(fd, &st) != 0)
    return fail("cannot stat {}: {}", name, std::strerror(errno));
  auto size = static_cast<std::uint64_t>(st.st_size);
  raw_header h{};
  auto head = std::min<std::uint64_t>(size, sizeof h);
  if (auto ok = pread_all(fd, path, std::as_writable_bytes(std::span(&h, 1)).first(head), 0); !ok)
    return std::unexpected(ok.error());
  if (size >= sizeof h.magic && std::memcmp(h.magic, tensor_magic, sizeof h.magic) != 0)
    return fail("{}: not an abg tensor file (bad magic)", name);
  if (size < sizeof h)
    return fail("{}: truncated: expected at least {} bytes (the header), found {}", name, sizeof h, size);
  if (h.format_version != tensor_format_version)
    return fail("{}: format version {} is not supported (this abg reads version {})", name, h.format_version,
                tensor_format_version);
  if (h.header_checksum != header_sum(h))
    return fail("{}: header checksum mismatch: file is corrupt", name);
  if (h.dtype != dtype_float32)
    return fail("{}: element type {} is not supported (this abg reads float32 = 1)", name, h.dtype);
  if (h.rank > tensor_max_rank)
    return fail("{}: rank {} exceeds the maximum of {}: file is corrupt", name, h.rank, tensor_max_rank);
  tensor_header out;
  std::uint64_t elements = 1;
  for (std::uint32_t i = 0; i < h.rank; ++i) {
    if (h.shape[i] < 0)
      return fail("{}: negative dimension {}: file is corrupt", name, h.shape[i]);
    auto dim = static_cast<std::uint64_t>(h.shape[i]);
    if (dim != 0 && elements > std::numeric_limits<std::uint64_t>::max() / 8 / dim)
      return fail("{}: shape overflows: file is corrupt", name);
    elements *= dim;
    out.shape.push_back(h.shape[i]);
  }
  if (h.payload_bytes != elements * sizeof(float))
    return fail("{}: payload of {} bytes does not match its shape ({} floats): file is corrupt", name,
                h.payload_bytes, elements);
  auto want = sizeof h + h.payload_bytes;
  if (size < want)
    return fail("{}: truncated: expected {} bytes, found {}", name, want, size);
  if (size > want)
    return fail("{}: expected {} bytes, found {} (trailing bytes): file is corrupt", name, want, size);
  std::memcpy(out.dataset.bytes.data(), h.dataset, 16);
  if (out.dataset != expected_dataset)
    return fail("{}: made from dataset {} but this entity path is dataset {}", name, out.dataset.hex(),
                expected_dataset.hex());
  out.payload_bytes = h.payload_bytes;
  out.payload_checksum = h.payload_checksum;
  return out;
}

expected<int> open_for_reading(const fs::path& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return fail("cannot open {}: {}", path.string(), std::strerror(errno));
  return fd;
}

} // namespace

std::int64_t element_count(std::span<const std::int64_t> shape) {
  std::int64_t n = 1;
  for (auto d : shape)
    n *= d;
  return n;
}

// --- atomic_file_writer ----------------------------------------------------------

expected<atomic_file_writer> atomic_file_writer::create(fs::path path) {
  auto tmp = temporary_path_for(path);
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0)
    return fail("cannot create {}: {}", tmp.string(), std::strerror(errno));
  auto* file = ::fdopen(fd, "wb");
  if (!file) {
    ::close(fd);
    ::unlink(tmp.c_str());
    return fail("cannot open {}: {}", tmp.string(), std::strerror(errno));
  }
  std::setvbuf(file, nullptr, _IOFBF, 1 << 20);
  return atomic_file_writer(std::move(path), std::move(tmp), file);
}

atomic_file_writer::atomic_file_writer(atomic_file_writer&& other) noexcept
  : path_(std::move(other.path_)), tmp_(std::move(other.tmp_)), file_(std::exchange(other.file_, nullptr)) {}

atomic_file_writer& atomic_file_writer::operator=(atomic_file_writer&& other) noexcept {
  if (this != &other) {
    abandon();
    path_ = std::move(other.path_);
    tmp_ = std::move(other.tmp_);
    file_ = std::exchange(other.file_, nullptr);
  }
  return *this;
}

atomic_file_writer::~atomic_file_writer() {
  abandon();
}

void atomic_file_writer::abandon() {
  if (file_) {
    std::fclose(std::exchange(file_, nullptr));
    ::unlink(tmp_.c_str());
  }
}

expected<void> atomic_file_writer::write(std::string_view bytes) {
  if (!file_)
    return fail("{}: write after commit", path_.string());
  if (std::fwrite(bytes.data(), 1, bytes.size(), file_) != bytes.size()) {
    auto message = std::strerror(errno);
    abandon();
    return fail("cannot write {}: {}", tmp_.string(), message);
  }
  return {};
}

expected<void> atomic_file_writer::write_at(std::uint64_t offset, std::span<const std::byte> bytes) {
  if (!file_)
    return fail("{}: write after commit", path_.string());
  if (std::fflush(file_) != 0) {
    auto message = std::strerror(errno);
    abandon();
    return fail("cannot write {}: {}", tmp_.string(), message);
  }
  for (std::size_t done = 0; done < bytes.size();) {
    auto n = ::pwrite(::fileno(file_), bytes.data() + done, bytes.size() - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0) {
      auto message = std::strerror(errno);
      abandon();
      return fail("cannot write {}: {}", tmp_.string(), message);
    }
    done += static_cast<std::size_t>(n);
  }
  return {};
}

expected<void> atomic_file_writer::commit(bool sync_directory, bool sync_file) {
  if (!file_)
    return fail("{}: committed twice", path_.string());
  if (std::fflush(file_) != 0 || (sync_file && ::fsync(::fileno(file_)) != 0)) {
    auto message = std::strerror(errno);
    abandon();
    return fail("cannot sync {}: {}", tmp_.string(), message);
  }
  if (std::fclose(std::exchange(file_, nullptr)) != 0) {
    auto message = std::strerror(errno);
    ::unlink(tmp_.c_str());
    return fail("cannot close {}: {}", tmp_.string(), message);
  }
  if (::rename(tmp_.c_str(), path_.c_str()) != 0) {
    auto message = std::strerror(errno);
    ::unlink(tmp_.c_str());
    return fail("cannot rename {} to {}: {}", tmp_.string(), path_.string(), message);
  }
  return sync_directory ? fsync_directory(path_.parent_path()) : expected<void>{};
}

// --- tensor files -----------------------------------------------------------------

tensor_file_writer::tensor_file_writer(atomic_file_writer out, const dataset_id& dataset,
                                       std::vector<std::int64_t> shape)
  : out_(std::move(out)), dataset_(dataset), shape_(std::move(shape)),
    total_(static_cast<std::uint64_t>(element_count(shape_))) {}

expected<tensor_file_writer> tensor_file_writer::create(fs::path path, const dataset_id& dataset,
                                                        std::span<const std::int64_t> shape) {
  if (shape.size() > tensor_max_rank)
    return fail("{}: rank {} exceeds the maximum of {}", path.string(), shape.size(), tensor_max_rank);
  for (auto d : shape)
    if (d < 0)
      return fail("{}: negative dimension {}", path.string(), d);
  auto out = atomic_file_writer::create(std::move(path));
  if (!out)
    return std::unexpected(out.error());
  // The header's place; its contents (the checksum above all) come at commit.
  const std::array<std::byte, tensor_header_size> blank{};
  if (auto ok = out->write(blank); !ok)
    return std::unexpected(ok.error());
  return tensor_file_writer(std::move(*out), dataset, {shape.begin(), shape.end()});
}

expected<void> tensor_file_writer::append(std::span<const float> values) {
  if (values.size() > total_ - written_)
    return fail("{}: {} more values than its shape holds", out_.path().string(), values.size() - (total_ - written_));
  if (auto ok = out_.write(bytes_of(values)); !ok)
    return ok;
  sum_.update(bytes_of(values));
  written_ += values.size();
  return {};
}

expected<std::uint64_t> tensor_file_writer::commit(tensor_write_options options) {
  if (written_ != total_)
    return fail("{}: shape holds {} values but {} were written", out_.path().string(), total_, written_);
  raw_header h{};
  std::memcpy(h.magic, tensor_magic, sizeof h.magic);
  h.format_version = tensor_format_version;
  h.dtype = dtype_float32;
  std::memcpy(h.dataset, dataset_.bytes.data(), 16);
  h.rank = static_cast<std::uint32_t>(shape_.size());
  std::copy(shape_.begin(), shape_.end(), h.shape);
  h.payload_bytes = total_ * sizeof(float);
  h.payload_checksum = sum_.digest();
  h.header_checksum = header_sum(h);
  if (auto ok = out_.write_at(0, std::as_bytes(std::span(&h, 1))); !ok)
    return std::unexpected(ok.error());
  if (auto ok = out_.commit(options.sync_directory, options.sync_file); !ok)
    return std::unexpected(ok.error());
  return h.payload_checksum;
}

expected<std::uint64_t> write_tensor_file(const fs::path& path, const dataset_id& dataset,
                                          std::span<const std::int64_t> shape, std::span<const float> data,
                                          tensor_write_options options) {
  auto out = tensor_file_writer::create(path, dataset, shape);
  if (!out)
    return std::unexpected(out.error());
  if (static_cast<std::uint64_t>(element_count(shape)) != data.size())
    return fail("{}: shape holds {} values but {} were given", path.string(), element_count(shape), data.size());
  if (auto ok = out->append(data); !ok)
    return std::unexpected(ok.error());
  return out->commit(options);
}

expected<tensor_header> read_tensor_header(const fs::path& path, const dataset_id& expected_dataset) {
  auto fd = open_for_reading(path);
  if (!fd)
    return std::unexpected(fd.error());
  fd_guard guard{*fd};
  return validate_header(*fd, path, expected_dataset);
}

expected<tensor_header> read_tensor_file_into(const fs::path& path, const dataset_id& expected_dataset,
                                              std::span<float> out) {
  auto fd = open_for_reading(path);
  if (!fd)
    return std::unexpected(fd.error());
  fd_guard guard{*fd};
  auto header = validate_header(*fd, path, expected_dataset);
  if (!header)
    return header;
  if (out.size_bytes() != header->payload_bytes)
    return fail("{}: holds {} floats but the caller expects {}", path.string(),
                header->payload_bytes / sizeof(float), out.size());
  if (auto ok = pread_all(*fd, path, std::as_writable_bytes(out), tensor_header_size); !ok)
    return std::unexpected(ok.error());
  if (checksum(std::as_bytes(out)) != header->payload_checksum)
    return fail("{}: checksum mismatch: file is corrupt", path.string());
  return header;
}

expected<mapped_tensor> map_tensor_file(const fs::path& path, const dataset_id& expected_dataset) {
  auto header = read_tensor_header(path, expected_dataset);
  if (!header)
    return std::unexpected(header.error());
  auto file = mapped_file::open(path, map_access::sequential);
  if (!file)
    return std::unexpected(file.error());
  // The file may have changed between the two opens: the mapping is what counts.
  if (file->size() != tensor_header_size + header->payload_bytes)
    return fail("{}: changed while it was opened: expected {} bytes, mapped {}", path.string(),
                tensor_header_size + header->payload_bytes, file->size());
  auto payload = file->bytes().subspan(tensor_header_size);
  if (checksum(payload) != header->payload_checksum)
    return fail("{}: checksum mismatch: file is corrupt", path.string());
  std::span<const float> values(reinterpret_cast<const float*>(payload.data()), payload.size() / sizeof(float));
  return mapped_tensor{std::move(*file), std::move(header->shape), header->payload_checksum, values};
}

expected<tensor> read_tensor_file(const fs::path& path, const dataset_id& expected_dataset) {
  auto header = read_tensor_header(path, expected_dataset);
  if (!header)
    return std::unexpected(header.error());
  tensor t{header->shape, std::vector<float>(header->payload_bytes / sizeof(float))};
  if (auto ok = read_tensor_file_into(path, expected_dataset, t.data); !ok)
    return std::unexpected(ok.error());
  return t;
}

} // namespace abg::storage
