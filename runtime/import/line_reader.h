// Reads a text file line by line, plain or gzip-compressed (zlib detects which),
// in large blocks; lines are views into the block and valid until the next call.
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

  /// The next line without its terminator ("\n" or "\r\n"); false at the end.
  /// A read or decompression error is returned as an error.
  expected<bool> next(std::string_view& line);
  std::uint64_t line_number() const { return line_number_; }
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
  std::uint64_t line_number_ = 0;
  std::uint64_t file_size_ = 0;
};

} // namespace abg::import
