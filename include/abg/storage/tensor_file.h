// Tensor files (.abgt): one float32 tensor after a fixed 128-byte header, so
// the payload is 64-byte aligned and a reader may memory-map it. Checkpoints
// are made of them. Byte layout in docs/formats.md.
#pragma once

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <span>
#include <string_view>
#include <vector>

#include "abg/error.h"
#include "abg/storage/files.h"
#include "abg/storage/mapped_file.h"

namespace abg::storage {

inline constexpr std::uint32_t tensor_format_version = 1;
inline constexpr std::uint64_t tensor_header_size = 128;
inline constexpr std::size_t tensor_max_rank = 8;

/// A float32 tensor in C order, owning its values.
struct tensor {
  std::vector<std::int64_t> shape;
  std::vector<float> data;
};

/// Product of the dimensions (1 for rank 0).
std::int64_t element_count(std::span<const std::int64_t> shape);

/// What a tensor file's header says, after validation.
struct tensor_header {
  dataset_id dataset;
  std::vector<std::int64_t> shape;
  std::uint64_t payload_bytes = 0;
  std::uint64_t payload_checksum = 0; // XXH3-64 of the payload
};

/// A file written under a temporary name next to its target and renamed into
/// place by commit(); until then (or if abandoned) the target is untouched.
/// Appends are buffered; the destructor removes an uncommitted temporary.
class atomic_file_writer {
public:
  static expected<atomic_file_writer> create(std::filesystem::path path);
  atomic_file_writer(atomic_file_writer&& other) noexcept;
  atomic_file_writer& operator=(atomic_file_writer&& other) noexcept;
  atomic_file_writer(const atomic_file_writer&) = delete;
  atomic_file_writer& operator=(const atomic_file_writer&) = delete;
  ~atomic_file_writer();

  expected<void> write(std::string_view bytes);
  expected<void> write(std::span<const std::byte> bytes) {
    return write(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
  }
  /// Replaces bytes already written, from `offset` (a header that is known
  /// only at the end).
  expected<void> write_at(std::uint64_t offset, std::span<const std::byte> bytes);
  /// Flushes, fsyncs (unless `sync_file` is false), renames over the target
  /// and (if asked) fsyncs its directory.
  expected<void> commit(bool sync_directory = true, bool sync_file = true);
  const std::filesystem::path& path() const { return path_; }

private:
  atomic_file_writer(std::filesystem::path path, std::filesystem::path tmp, std::FILE* file)
    : path_(std::move(path)), tmp_(std::move(tmp)), file_(file) {}
  void abandon();
  std::filesystem::path path_, tmp_;
  std::FILE* file_ = nullptr;
};

struct tensor_write_options {
  /// fsync the directory after the rename; a caller writing many files into one
  /// directory turns this off and syncs the directory once at the end.
  bool sync_directory = true;
  /// fsync the file before the rename; off for scratch files that no crash
  /// recovery reads (a partition store's), so the page cache absorbs them.
  bool sync_file = true;
};

/// A tensor file written in pieces, front to back, so the tensor never has
/// to be in memory whole (a partition arriving in chunks). Atomic like
/// write_tensor_file, which is one append of everything.
class tensor_file_writer {
public:
  static expected<tensor_file_writer> create(std::filesystem::path path, const dataset_id& dataset,
                                             std::span<const std::int64_t> shape);
  /// The next values in C order; refused past what the shape holds.
  expected<void> append(std::span<const float> values);
  /// Once every value is appended: writes the header and renames the file
  /// into place; the payload checksum.
  expected<std::uint64_t> commit(tensor_write_options options = {});

private:
  tensor_file_writer(atomic_file_writer out, const dataset_id& dataset, std::vector<std::int64_t> shape);
  atomic_file_writer out_;
  dataset_id dataset_;
  std::vector<std::int64_t> shape_;
  std::uint64_t total_ = 0;   // values the shape holds
  std::uint64_t written_ = 0; // values appended
  checksum_stream sum_;
};

/// Writes `data` (C order, element_count(shape) values) atomically; returns the payload checksum.
expected<std::uint64_t> write_tensor_file(const std::filesystem::path& path, const dataset_id& dataset,
                                          std::span<const std::int64_t> shape, std::span<const float> data,
                                          tensor_write_options options = {});

/// Reads and validates the header: magic, version, header checksum, dtype,
/// rank, payload size against the file size, and the dataset id.
expected<tensor_header> read_tensor_header(const std::filesystem::path& path, const dataset_id& expected_dataset);

/// Reads the payload into `out` (exactly element_count(shape) values) after
/// validating the header, then verifies the payload checksum.
expected<tensor_header> read_tensor_file_into(const std::filesystem::path& path, const dataset_id& expected_dataset,
                                              std::span<float> out);

/// A tensor file mapped read-only after its header and payload checksum were
/// verified: `values` point into `file`'s mapping (the 128-byte header and
/// page-aligned mappings keep them aligned).
struct mapped_tensor {
  mapped_file file;
  std::vector<std::int64_t> shape;
  std::uint64_t payload_checksum = 0;
  std::span<const float> values;
};
expected<mapped_tensor> map_tensor_file(const std::filesystem::path& path, const dataset_id& expected_dataset);

/// Reads and validates a whole tensor file.
expected<tensor> read_tensor_file(const std::filesystem::path& path, const dataset_id& expected_dataset);

} // namespace abg::storage
