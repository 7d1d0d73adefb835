// A whole file mapped read-only into memory (mmap), unmapped when the last
// owner goes away. Readers that touch only part of a large file, or read it
// once, use it instead of copying the file into a buffer: the pages come
// straight from the page cache.
#pragma once

#include <cstddef>
#include <filesystem>
#include <span>

#include "abg/error.h"

namespace abg::storage {

/// How the pages of a mapping will be read (madvise).
enum class map_access {
  sequential, // read front to back, most of it: read ahead aggressively
  random,     // a few places: no read-ahead beyond the pages touched
};

class mapped_file {
public:
  /// Maps `path` whole; an empty file maps to an empty span. Errors name the file.
  static expected<mapped_file> open(const std::filesystem::path& path, map_access access = map_access::sequential);

  mapped_file() = default;
  mapped_file(mapped_file&& other) noexcept;
  mapped_file& operator=(mapped_file&& other) noexcept;
  mapped_file(const mapped_file&) = delete;
  mapped_file& operator=(const mapped_file&) = delete;
  ~mapped_file();

  std::span<const std::byte> bytes() const { return {data_, size_}; }
  std::size_t size() const { return size_; }
  const std::filesystem::path& path() const { return path_; }

private:
  void release();
  std::filesystem::path path_;
  const std::byte* data_ = nullptr;
  std::size_t size_ = 0;
};

} // namespace abg::storage
