// Edge lines (abg/edge_lines.h): column checks, delimiter names, line_reader.
#include "abg/edge_lines.h"

#include <algorithm>
#include <cerrno>
#include <set>

#include <unistd.h>
#include <zlib.h>

namespace abg {

namespace {
constexpr std::size_t block = 4 << 20;
}

expected<void> edge_columns::check() const {
  std::set<int> columns;
  auto use = [&](int col, std::string_view what) -> expected<void> {
    if (col < 0)
      return fail("--{}-col {} must be 0 or more (columns are 0-based)", what, col);
    if (!columns.insert(col).second)
      return fail("column {} is given for two roles; --lhs-col, --rhs-col, --rel-col and --weight-col must differ",
                  col);
    return {};
  };
  if (auto ok = use(lhs_col, "lhs"); !ok)
    return ok;
  if (auto ok = use(rhs_col, "rhs"); !ok)
    return ok;
  if (rel_col)
    if (auto ok = use(*rel_col, "rel"); !ok)
      return ok;
  if (weight_col)
    if (auto ok = use(*weight_col, "weight"); !ok)
      return ok;
  if (delimiter == '\n' || delimiter == '\r')
    return fail("the delimiter cannot be a line break");
  return {};
}

int edge_columns::needed() const {
  return std::max({lhs_col, rhs_col, rel_col.value_or(-1), weight_col.value_or(-1)}) + 1;
}

expected<char> parse_delimiter(std::string_view text) {
  if (text == "\\t" || text == "tab" || text == "\t")
    return '\t';
  if (text == "space")
    return ' ';
  if (text.size() == 1 && text != "\n" && text != "\r")
    return text[0];
  return fail("--delimiter '{}' must be one character, \\t, tab or space", text);
}

bool is_utf8(std::string_view text) {
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  const auto* end = p + text.size();
  while (p < end) {
    unsigned c = *p++;
    if (c < 0x80) continue;
    int more = 0;
    unsigned least = 0;
    if ((c & 0xE0) == 0xC0) {
      more = 1, least = 0x80, c &= 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      more = 2, least = 0x800, c &= 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      more = 3, least = 0x10000, c &= 0x07;
    } else {
      return false;
    }
    if (end - p < more) return false;
    for (int i = 0; i < more; ++i, ++p) {
      if ((*p & 0xC0) != 0x80) return false;
      c = (c << 6) | (*p & 0x3F);
    }
    // Overlong forms, UTF-16 surrogates and code points past U+10FFFF are not UTF-8.
    if (c < least || (c >= 0xD800 && c <= 0xDFFF) || c > 0x10FFFF) return false;
  }
  return true;
}

std::string excerpt(std::string_view text) {
  std::string out;
  for (char c : text.substr(0, 120)) {
    if (c == '\t')
      out += "\\t";
    else if (static_cast<unsigned char>(c) < 0x20)
      out += fmt::format("\\x{:02x}", static_cast<unsigned char>(c));
    else
      out += c;
  }
  if (text.size() > 120)
    out += "...";
  return out;
}

expected<line_reader> line_reader::open(const std::filesystem::path& path) {
  line_reader r;
  r.path_ = path;
  auto f = gzopen(path.c_str(), "rb");
  if (!f)
    return fail("cannot open {}: {}", path.string(), errno ? std::strerror(errno) : "out of memory");
  gzbuffer(f, 1 << 18);
  r.file_ = f;
  r.buffer_.resize(block);
  std::error_code ec;
  r.file_size_ = std::filesystem::file_size(path, ec);
  return r;
}

expected<line_reader> line_reader::open_stdin(std::string name) {
  line_reader r;
  r.path_ = std::move(name);
  // gzclose closes the descriptor it is given: hand it a copy, keep fd 0.
  int fd = ::dup(STDIN_FILENO);
  if (fd < 0)
    return fail("cannot read {}: {}", r.path_.string(), std::strerror(errno));
  auto f = gzdopen(fd, "rb");
  if (!f) {
    ::close(fd);
    return fail("cannot read {}: out of memory", r.path_.string());
  }
  gzbuffer(f, 1 << 18);
  r.file_ = f;
  r.buffer_.resize(block);
  return r; // file_size_ 0: no progress fraction for a pipe
}

line_reader::line_reader(line_reader&& other) noexcept
  : path_(std::move(other.path_)), file_(std::exchange(other.file_, nullptr)), buffer_(std::move(other.buffer_)),
    begin_(other.begin_), end_(other.end_), eof_(other.eof_),
    file_size_(other.file_size_) {}

double line_reader::fraction_read() const {
  if (file_size_ == 0)
    return 0.0;
  auto offset = gzoffset(static_cast<gzFile>(file_));
  return offset < 0 ? 0.0 : std::min(1.0, static_cast<double>(offset) / static_cast<double>(file_size_));
}

line_reader::~line_reader() {
  if (file_)
    gzclose(static_cast<gzFile>(file_));
}

expected<bool> line_reader::refill() {
  // Keep the unfinished line, grow the buffer if one line fills it.
  std::size_t tail = end_ - begin_;
  if (begin_ > 0 && tail > 0)
    std::memmove(buffer_.data(), buffer_.data() + begin_, tail);
  begin_ = 0;
  end_ = tail;
  if (end_ == buffer_.size())
    buffer_.resize(buffer_.size() * 2);
  auto want = static_cast<unsigned>(std::min<std::size_t>(buffer_.size() - end_, 1u << 30));
  int n = gzread(static_cast<gzFile>(file_), buffer_.data() + end_, want);
  if (n < 0) {
    int code = 0;
    const char* message = gzerror(static_cast<gzFile>(file_), &code);
    return fail("cannot read {}: {}", path_.string(),
                code == Z_ERRNO ? std::strerror(errno) : fmt::format("corrupt gzip data ({})", message));
  }
  if (n == 0) {
    int code = 0;
    const char* message = gzerror(static_cast<gzFile>(file_), &code);
    if (code != Z_OK) // Z_BUF_ERROR here means the gzip stream was cut short
      return fail("cannot read {}: truncated or corrupt gzip data ({})", path_.string(), message);
    eof_ = true;
  }
  end_ += static_cast<std::size_t>(n);
  return true;
}

expected<bool> line_reader::next_block(std::string_view& block) {
  for (;;) {
    const char* start = buffer_.data() + begin_;
    std::size_t avail = end_ - begin_;
    if (eof_) {
      if (avail == 0)
        return false;
      block = {start, avail};
      begin_ = end_;
      return true;
    }
    auto* last = static_cast<const char*>(::memrchr(start, '\n', avail));
    if (last) {
      auto len = static_cast<std::size_t>(last - start) + 1;
      block = {start, len};
      begin_ += len;
      return true;
    }
    if (auto ok = refill(); !ok)
      return ok;
  }
}

} // namespace abg
