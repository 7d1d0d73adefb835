// Reads a text file, plain or gzip-compressed (zlib detects which), in large
// blocks of whole lines; a block is valid until the next call.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "abg/error.h"

namespace abg::import {

class line_reader {
public:
  static expected<line_reader> open(const std::filesystem::path& path);
  line_reader(line_reader&&) noexcept;
  line_reader& operator=(line_reader&&) = delete;
  ~line_reader();

  /// The next block of whole lines, each ending in '\n' except perhaps the
  /// file's last; false at the end. Read and decompression errors are errors.
  expected<bool> next_block(std::string_view& block);
  /// How much of the file (compressed bytes for gzip) has been consumed, 0..1.
  double fraction_read() const;

private:
  line_reader() = default;
  expected<bool> refill();

  std::filesystem::path path_;
  void* file_ = nullptr; // gzFile
  std::vector<char> buffer_;
  std::size_t begin_ = 0, end_ = 0;
  bool eof_ = false;
  std::uint64_t file_size_ = 0;
};

} // namespace abg::import
