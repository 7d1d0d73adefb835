#include "runtime/import/spill_file.h"

#include <cerrno>
#include <cstring>

#include <fcntl.h>
#include <unistd.h>

namespace abg::import {

expected<spill_file> spill_file::create(const std::filesystem::path& dir) {
  spill_file s;
  s.dir_ = dir;
  s.fd_ = ::open(dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  if (s.fd_ < 0) { // file systems without O_TMPFILE: create, then unlink
    auto name = dir / fmt::format(".abg-import-spill.{}", ::getpid());
    s.fd_ = ::open(name.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (s.fd_ < 0)
      return fail("cannot create a temporary file in {}: {}", dir.string(), std::strerror(errno));
    ::unlink(name.c_str());
  }
  s.buffer_.reserve(1 << 16);
  return s;
}

spill_file::spill_file(spill_file&& other) noexcept
  : fd_(std::exchange(other.fd_, -1)), dir_(std::move(other.dir_)), buffer_(std::move(other.buffer_)),
    count_(other.count_) {
  buffer_.reserve(1 << 16);
}

spill_file::~spill_file() {
  if (fd_ >= 0)
    ::close(fd_);
}

expected<void> spill_file::flush() {
  auto* p = reinterpret_cast<const char*>(buffer_.data());
  std::size_t left = buffer_.size() * sizeof(spill_record);
  auto offset = static_cast<off_t>(count_ * sizeof(spill_record));
  while (left > 0) {
    auto n = ::pwrite(fd_, p, left, offset);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      return fail("cannot write the temporary file in {}: {} (is the disk full?)", dir_.string(),
                  std::strerror(errno));
    }
    p += n;
    left -= static_cast<std::size_t>(n);
    offset += n;
  }
  count_ += buffer_.size();
  buffer_.clear();
  return {};
}

expected<void> spill_file::read_at(spill_record* out, std::uint64_t n, std::uint64_t first) const {
  auto* p = reinterpret_cast<char*>(out);
  std::size_t left = n * sizeof(spill_record);
  auto offset = static_cast<off_t>(first * sizeof(spill_record));
  while (left > 0) {
    auto got = ::pread(fd_, p, left, offset);
    if (got <= 0) {
      if (got < 0 && errno == EINTR)
        continue;
      return fail("cannot read back the temporary file in {}: {}", dir_.string(),
                  got < 0 ? std::strerror(errno) : "unexpected end");
    }
    p += got;
    left -= static_cast<std::size_t>(got);
    offset += got;
  }
  return {};
}

} // namespace abg::import
