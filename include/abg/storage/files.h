// Crash-safe file primitives shared by every writer: a file is written under a
// temporary name, fsynced, renamed over the target and its directory fsynced,
// so a crash leaves either the old file or the new one.
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "abg/error.h"

namespace abg::storage {

/// XXH3-64 of a byte range: the checksum of every abg file.
std::uint64_t checksum(std::span<const std::byte> bytes);
std::uint64_t checksum(std::string_view bytes);
/// The same checksum of bytes that arrive in pieces: update() each piece in
/// order; digest() equals checksum() of them all.
class checksum_stream {
public:
  checksum_stream();
  void update(std::span<const std::byte> bytes);
  std::uint64_t digest() const;

private:
  struct state;
  struct release {
    void operator()(state* s) const;
  };
  std::unique_ptr<state, release> state_;
};

/// Checksums as they appear in manifests: 16 lower-case hex digits.
std::string checksum_hex(std::uint64_t sum);

/// 128 random bits naming one entity path; every edge path and checkpoint made
/// from it records it, so files of different datasets are never mixed.
struct dataset_id {
  std::array<std::uint8_t, 16> bytes{};

  static dataset_id random();
  static expected<dataset_id> parse(std::string_view hex);
  std::string hex() const;
  friend bool operator==(const dataset_id&, const dataset_id&) = default;
};

/// Writes `contents` to `path` atomically (temp file, fsync, rename, fsync dir).
expected<void> write_file_atomic(const std::filesystem::path& path, std::string_view contents);

/// Appends `contents` to `path` (created if missing) and fsyncs it (and its
/// directory when it was created): a line of a log that must survive a crash.
expected<void> append_durable(const std::filesystem::path& path, std::string_view contents);

/// Reads a whole file; errors name the file.
expected<std::string> read_file(const std::filesystem::path& path);

/// fsync() of a directory, making renames inside it durable.
expected<void> fsync_directory(const std::filesystem::path& dir);

/// fsync() of a file by name.
expected<void> fsync_file(const std::filesystem::path& path);

/// A temporary name next to `path` (same directory, so rename is atomic).
std::filesystem::path temporary_path_for(const std::filesystem::path& path);

/// An exclusive advisory lock (flock) on DIR/.abg.lock, held while alive.
/// Refuses (does not wait) when another process holds it, naming that
/// process and what it is doing.
class directory_lock {
public:
  static expected<directory_lock> acquire(const std::filesystem::path& dir, std::string_view purpose);
  directory_lock(directory_lock&& other) noexcept;
  directory_lock& operator=(directory_lock&& other) noexcept;
  directory_lock(const directory_lock&) = delete;
  directory_lock& operator=(const directory_lock&) = delete;
  ~directory_lock();

private:
  explicit directory_lock(int fd) : fd_(fd) {}
  int fd_ = -1;
};

} // namespace abg::storage
