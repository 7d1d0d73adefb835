#include "abg/storage/files.h"

#include <cerrno>
#include <cstring>
#include <new>
#include <random>

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>
#include <xxhash.h>

namespace abg::storage {

namespace fs = std::filesystem;

std::uint64_t checksum(std::span<const std::byte> bytes) {
  return XXH3_64bits(bytes.data(), bytes.size());
}

std::uint64_t checksum(std::string_view bytes) {
  return XXH3_64bits(bytes.data(), bytes.size());
}

// XXH3's streaming state, behind a name of ours so the header needs no xxhash.h.
struct checksum_stream::state {
  XXH3_state_t* xxh;
};

void checksum_stream::release::operator()(state* s) const {
  XXH3_freeState(s->xxh);
  delete s;
}

checksum_stream::checksum_stream() : state_(new state{XXH3_createState()}) {
  if (state_->xxh == nullptr || XXH3_64bits_reset(state_->xxh) != XXH_OK)
    throw std::bad_alloc();
}

void checksum_stream::update(std::span<const std::byte> bytes) {
  XXH3_64bits_update(state_->xxh, bytes.data(), bytes.size());
}

std::uint64_t checksum_stream::digest() const {
  return XXH3_64bits_digest(state_->xxh);
}

std::string checksum_hex(std::uint64_t sum) {
  return fmt::format("{:016x}", sum);
}

dataset_id dataset_id::random() {
  std::random_device device;
  dataset_id id;
  for (std::size_t i = 0; i < id.bytes.size(); i += 4) {
    auto word = device();
    for (std::size_t k = 0; k < 4; ++k)
      id.bytes[i + k] = static_cast<std::uint8_t>(word >> (8 * k));
  }
  return id;
}

expected<dataset_id> dataset_id::parse(std::string_view hex) {
  if (hex.size() != 32)
    return fail("dataset id '{}' must be 32 hex digits", hex);
  dataset_id id;
  for (std::size_t i = 0; i < 16; ++i) {
    unsigned value = 0;
    for (std::size_t k = 0; k < 2; ++k) {
      char c = hex[2 * i + k];
      unsigned digit;
      if (c >= '0' && c <= '9')
        digit = static_cast<unsigned>(c - '0');
      else if (c >= 'a' && c <= 'f')
        digit = static_cast<unsigned>(c - 'a' + 10);
      else
        return fail("dataset id '{}' must be 32 lower-case hex digits", hex);
      value = value * 16 + digit;
    }
    id.bytes[i] = static_cast<std::uint8_t>(value);
  }
  return id;
}

std::string dataset_id::hex() const {
  std::string out;
  out.reserve(32);
  for (auto b : bytes)
    out += fmt::format("{:02x}", b);
  return out;
}

fs::path temporary_path_for(const fs::path& path) {
  return path.parent_path() / fmt::format(".{}.tmp.{}", path.filename().string(), ::getpid());
}

expected<void> fsync_file(const fs::path& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return fail("cannot open {} to sync it: {}", path.string(), std::strerror(errno));
  int rc = ::fsync(fd);
  int saved = errno;
  ::close(fd);
  if (rc != 0)
    return fail("cannot sync {}: {}", path.string(), std::strerror(saved));
  return {};
}

expected<void> fsync_directory(const fs::path& dir) {
  return fsync_file(dir.empty() ? fs::path(".") : dir);
}

namespace {

// Writes all of `contents` to fd; errno describes a failure.
bool write_all(int fd, std::string_view contents) {
  const char* p = contents.data();
  std::size_t left = contents.size();
  while (left > 0) {
    auto n = ::write(fd, p, left);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      return false;
    }
    p += n;
    left -= static_cast<std::size_t>(n);
  }
  return true;
}

} // namespace

expected<void> append_durable(const fs::path& path, std::string_view contents) {
  const bool existed = fs::exists(path);
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0)
    return fail("cannot open {} to append: {}", path.string(), std::strerror(errno));
  if (!write_all(fd, contents) || ::fsync(fd) != 0) {
    int saved = errno;
    ::close(fd);
    return fail("cannot append to {}: {}", path.string(), std::strerror(saved));
  }
  if (::close(fd) != 0)
    return fail("cannot close {}: {}", path.string(), std::strerror(errno));
  return existed ? expected<void>{} : fsync_directory(path.parent_path());
}

expected<void> write_file_atomic(const fs::path& path, std::string_view contents) {
  auto tmp = temporary_path_for(path);
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0)
    return fail("cannot create {}: {}", tmp.string(), std::strerror(errno));
  if (!write_all(fd, contents)) {
    int saved = errno;
    ::close(fd);
    ::unlink(tmp.c_str());
    return fail("cannot write {}: {}", tmp.string(), std::strerror(saved));
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    int saved = errno;
    ::unlink(tmp.c_str());
    return fail("cannot sync {}: {}", tmp.string(), std::strerror(saved));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int saved = errno;
    ::unlink(tmp.c_str());
    return fail("cannot rename {} to {}: {}", tmp.string(), path.string(), std::strerror(saved));
  }
  return fsync_directory(path.parent_path());
}

expected<std::string> read_file(const fs::path& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return fail("cannot open {}: {}", path.string(), std::strerror(errno));
  std::string out;
  char buffer[1 << 16];
  for (;;) {
    auto n = ::read(fd, buffer, sizeof buffer);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      int saved = errno;
      ::close(fd);
      return fail("cannot read {}: {}", path.string(), std::strerror(saved));
    }
    if (n == 0)
      break;
    out.append(buffer, static_cast<std::size_t>(n));
  }
  ::close(fd);
  return out;
}

expected<directory_lock> directory_lock::acquire(const fs::path& dir, std::string_view purpose) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec)
    return fail("cannot create directory {}: {}", dir.string(), ec.message());
  auto file = dir / ".abg.lock";
  int fd = ::open(file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0)
    return fail("cannot open lock file {}: {}", file.string(), std::strerror(errno));
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    char holder[256] = {};
    auto n = ::pread(fd, holder, sizeof holder - 1, 0);
    ::close(fd);
    std::string who = n > 0 ? std::string(holder, static_cast<std::size_t>(n)) : "another process";
    while (!who.empty() && (who.back() == '\n' || who.back() == '\0'))
      who.pop_back();
    return fail("{} is in use by {} (lock file {}); wait for it to finish, then run again",
                dir.string(), who, file.string());
  }
  auto note = fmt::format("pid {} ({})\n", ::getpid(), purpose);
  if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, note.data(), note.size(), 0) < 0) {
    // The lock itself is held; the note is only for the message above.
  }
  return directory_lock(fd);
}

directory_lock::directory_lock(directory_lock&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}

directory_lock& directory_lock::operator=(directory_lock&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0)
      ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
  }
  return *this;
}

directory_lock::~directory_lock() {
  if (fd_ >= 0)
    ::close(fd_); // closing releases the flock
}

} // namespace abg::storage
