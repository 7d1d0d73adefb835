#include "abg/storage/mapped_file.h"

#include <cerrno>
#include <cstring>
#include <utility>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace abg::storage {

expected<mapped_file> mapped_file::open(const std::filesystem::path& path, map_access access) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return fail("cannot open {}: {}", path.string(), std::strerror(errno));
  struct stat st{};
  if (::fstat(fd, &st) != 0) {
    auto err = errno;
    ::close(fd);
    return fail("cannot stat {}: {}", path.string(), std::strerror(err));
  }
  mapped_file m;
  m.path_ = path;
  m.size_ = static_cast<std::size_t>(st.st_size);
  if (m.size_ > 0) {
    void* p = ::mmap(nullptr, m.size_, PROT_READ, MAP_PRIVATE, fd, 0);
    auto err = errno;
    ::close(fd);
    if (p == MAP_FAILED)
      return fail("cannot map {}: {}", path.string(), std::strerror(err));
    // Advice only: a kernel that ignores it (or predates it) reads the same bytes.
    ::madvise(p, m.size_, access == map_access::sequential ? MADV_SEQUENTIAL : MADV_RANDOM);
#ifdef MADV_POPULATE_READ
    // The whole file will be read: map every page now, in one call, rather
    // than one page fault at a time (Linux 5.14+).
    if (access == map_access::sequential)
      ::madvise(p, m.size_, MADV_POPULATE_READ);
#endif
    m.data_ = static_cast<const std::byte*>(p);
  } else {
    ::close(fd);
  }
  return m;
}

mapped_file::mapped_file(mapped_file&& other) noexcept
  : path_(std::move(other.path_)), data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}

mapped_file& mapped_file::operator=(mapped_file&& other) noexcept {
  if (this != &other) {
    release();
    path_ = std::move(other.path_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

mapped_file::~mapped_file() { release(); }

void mapped_file::release() {
  if (data_ != nullptr)
    ::munmap(const_cast<std::byte*>(data_), size_);
  data_ = nullptr;
  size_ = 0;
}

} // namespace abg::storage
