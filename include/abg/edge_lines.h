// Delimited edge lines as `abg import` reads them; `abg score` reads its
// input the same way, so both take the same column options: the column
// layout, the delimiter names, splitting a line into fields, and a reader of
// whole lines from a plain or gzip file (or stdin).
#pragma once

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "abg/error.h"

namespace abg {

/// Which 0-based columns of a line hold an edge (--lhs-col, --rhs-col,
/// --rel-col, --weight-col) and what separates them (--delimiter).
struct edge_columns {
  int lhs_col = 0;
  int rhs_col = 1;
  std::optional<int> rel_col;    // absent: every edge has relation 0
  std::optional<int> weight_col; // absent: every edge weighs 1
  char delimiter = '\t';

  /// Columns 0 or more and pairwise distinct, a delimiter that is no line break.
  expected<void> check() const;
  /// How many fields a line needs: the highest column used + 1.
  int needed() const;
  /// Splits the first needed() fields of `line` into `fields` (size needed());
  /// returns how many it found, fewer than needed() when the line is short.
  int split(std::string_view line, std::span<std::string_view> fields) const {
    const int want = static_cast<int>(fields.size());
    std::size_t pos = 0;
    int got = 0;
    for (; got < want; ++got) {
      auto* hit = static_cast<const char*>(std::memchr(line.data() + pos, delimiter, line.size() - pos));
      auto end = hit ? static_cast<std::size_t>(hit - line.data()) : line.size();
      fields[static_cast<std::size_t>(got)] = line.substr(pos, end - pos);
      if (!hit)
        return got + 1;
      pos = end + 1;
    }
    return got;
  }
};

/// --delimiter's text: one character, "\t" (backslash t), "tab" or "space".
expected<char> parse_delimiter(std::string_view text);

/// Cuts the first line off `block` and returns it without its '\n' or a
/// trailing '\r' (CRLF files).
inline std::string_view take_line(std::string_view& block) {
  auto nl = block.find('\n');
  auto line = block.substr(0, nl);
  block.remove_prefix(nl == std::string_view::npos ? block.size() : nl + 1);
  if (!line.empty() && line.back() == '\r')
    line.remove_suffix(1);
  return line;
}

/// Blank lines (spaces and tabs only) hold no edge.
inline bool is_blank(std::string_view line) { return line.find_first_not_of(" \t") == std::string_view::npos; }

/// Whether `text` is well-formed UTF-8 (what JSON files, like entities.json
/// that keeps relation names, can hold).
bool is_utf8(std::string_view text);

/// At most the first 120 characters of `text`, tabs and control characters
/// escaped, for quoting a line or a name in a message.
std::string excerpt(std::string_view text);

/// Reads a text file, plain or gzip-compressed (zlib detects which), in large
/// blocks of whole lines; a block is valid until the next call.
class line_reader {
public:
  static expected<line_reader> open(const std::filesystem::path& path);
  /// Standard input, plain or gzip; `name` is what messages call it.
  static expected<line_reader> open_stdin(std::string name = "standard input");
  line_reader(line_reader&&) noexcept;
  line_reader& operator=(line_reader&&) = delete;
  ~line_reader();

  /// The next block of whole lines, each ending in '\n' except perhaps the
  /// file's last; false at the end. Read and decompression errors are errors.
  expected<bool> next_block(std::string_view& block);
  /// How much of the file (compressed bytes for gzip) has been consumed, 0..1
  /// (0 for stdin).
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

} // namespace abg
