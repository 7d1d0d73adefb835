// Bucket edge files: the edges of one (lhs partition, rhs partition) bucket of
// one edge path, as column arrays after a fixed 64-byte header, so a reader can
// memory-map them. Byte layout in docs/formats.md.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <vector>

#include "abg/error.h"
#include "abg/storage/files.h"

namespace abg::storage {

inline constexpr std::uint32_t bucket_format_version = 1;
inline constexpr std::size_t bucket_header_size = 64;

struct bucket_layout {
  std::uint64_t edge_count = 0;
  std::uint32_t id_width = 4; // bytes per lhs/rhs/rel id: 4 or 8
  bool has_weights = false;   // float32 weight column present

  std::uint64_t column_offset(int column) const; // 0 lhs, 1 rhs, 2 rel, 3 weight
  std::uint64_t file_size() const;
};

/// The file name of bucket (lhs, rhs) inside an edge path.
std::string bucket_file_name(std::int64_t lhs, std::int64_t rhs);

/// Writes one bucket whose edge count is known up front. Columns go through
/// small buffers straight to their final offsets; commit() adds the checksum
/// and header, fsyncs and renames the file into place.
class bucket_writer {
public:
  static expected<bucket_writer> create(std::filesystem::path path, const dataset_id& id, bucket_layout layout,
                                        std::size_t buffer_edges = 1 << 14);
  bucket_writer(bucket_writer&&) noexcept;
  bucket_writer& operator=(bucket_writer&&) noexcept;
  ~bucket_writer(); // removes the temporary file unless committed

  expected<void> append(std::uint64_t lhs, std::uint64_t rhs, std::uint64_t rel, float weight) {
    if (pending_ == buffer_edges_)
      if (auto ok = flush(); !ok)
        return ok;
    put_id(0, lhs);
    put_id(1, rhs);
    put_id(2, rel);
    if (layout_.has_weights)
      reinterpret_cast<float*>(buffers_[3].data())[pending_] = weight;
    ++pending_;
    return {};
  }
  /// Finishes the file; returns its payload checksum. Does not fsync the directory
  /// (the caller does once for all buckets).
  expected<std::uint64_t> commit();

private:
  bucket_writer() = default;
  void put_id(int column, std::uint64_t value) {
    if (layout_.id_width == 4)
      reinterpret_cast<std::uint32_t*>(buffers_[column].data())[pending_] = static_cast<std::uint32_t>(value);
    else
      reinterpret_cast<std::uint64_t*>(buffers_[column].data())[pending_] = value;
  }
  expected<void> flush();

  std::filesystem::path path_, tmp_;
  dataset_id id_;
  bucket_layout layout_;
  int fd_ = -1;
  std::size_t buffer_edges_ = 0, pending_ = 0;
  std::uint64_t written_ = 0;
  std::vector<std::byte> buffers_[4];
};

/// A validated, memory-mapped bucket file.
class bucket_reader {
public:
  /// Checks magic, version, header checksum, size and payload checksum; with
  /// `expected_id` also that the file belongs to that dataset.
  static expected<bucket_reader> open(const std::filesystem::path& path, const dataset_id* expected_id = nullptr);

  const bucket_layout& layout() const { return layout_; }
  const dataset_id& id() const { return id_; }
  std::uint64_t checksum() const { return checksum_; }
  std::uint64_t size() const { return layout_.edge_count; }
  std::uint64_t lhs(std::uint64_t i) const { return id_at(0, i); }
  std::uint64_t rhs(std::uint64_t i) const { return id_at(1, i); }
  std::uint64_t rel(std::uint64_t i) const { return id_at(2, i); }
  float weight(std::uint64_t i) const {
    return layout_.has_weights ? reinterpret_cast<const float*>(base(3))[i] : 1.0f;
  }

private:
  const std::byte* base(int column) const { return map_.get() + layout_.column_offset(column); }
  std::uint64_t id_at(int column, std::uint64_t i) const {
    return layout_.id_width == 4 ? reinterpret_cast<const std::uint32_t*>(base(column))[i]
                                 : reinterpret_cast<const std::uint64_t*>(base(column))[i];
  }
  std::shared_ptr<const std::byte> map_;
  bucket_layout layout_;
  dataset_id id_;
  std::uint64_t checksum_ = 0;
};

} // namespace abg::storage
