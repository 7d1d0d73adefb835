// What the fuzz targets share: a scratch folder for decoders that read files,
// checksum sealing for formats whose checksums would otherwise stop every
// mutated input at the first check, a socket fed with the input for decoders
// that read connections, and the seeds each target writes of valid inputs.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "abg/storage/files.h"

namespace abg::fuzz {

using bytes = std::span<const std::uint8_t>;

inline std::string_view as_text(bytes in) { return {reinterpret_cast<const char*>(in.data()), in.size()}; }

/// This process's scratch folder (one per process: libFuzzer may fork).
inline const std::filesystem::path& scratch() {
  static const std::filesystem::path dir = [] {
    // tmpfs where there is one: the writers fsync, which on a disk would
    // make each input cost milliseconds.
    std::error_code ec;
    auto base = std::filesystem::is_directory("/dev/shm", ec) ? std::filesystem::path("/dev/shm")
                                                               : std::filesystem::temp_directory_path();
    std::string templ = (base / "abg-fuzz-XXXXXX").string();
    if (!::mkdtemp(templ.data())) std::abort();
    std::filesystem::path p(templ);
    static struct remover {
      std::filesystem::path p;
      ~remover() {
        std::error_code ec;
        std::filesystem::remove_all(p, ec);
      }
    } r{p};
    return p;
  }();
  return dir;
}

inline void write_file(const std::filesystem::path& path, std::string_view contents) {
  std::filesystem::create_directories(path.parent_path());
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(contents.data(), static_cast<std::streamsize>(contents.size()));
}

/// Rewrites the checksums of a file laid out as a header of `header_size`
/// bytes, then a payload: the payload's XXH3 at `payload_sum_at` and the
/// header's (of the bytes before `header_sum_at`) at `header_sum_at`.
inline void seal(std::string& file, std::size_t header_size, std::size_t payload_sum_at, std::size_t header_sum_at) {
  if (file.size() < header_size) return;
  auto payload = storage::checksum(std::string_view(file).substr(header_size));
  std::memcpy(file.data() + payload_sum_at, &payload, 8);
  auto header = storage::checksum(std::string_view(file).substr(0, header_sum_at));
  std::memcpy(file.data() + header_sum_at, &header, 8);
}

/// One end of a connected socket pair from which `in` can be read, then the
/// end of the stream (writes to it are discarded by the kernel's buffer).
inline int socket_with(std::string_view in) {
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) std::abort();
  int size = 4 << 20;
  ::setsockopt(sv[0], SOL_SOCKET, SO_RCVBUF, &size, sizeof size);
  ::setsockopt(sv[1], SOL_SOCKET, SO_SNDBUF, &size, sizeof size);
  ::setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &size, sizeof size);
  ::fcntl(sv[1], F_SETFL, O_NONBLOCK);
  std::size_t off = 0;
  while (off < in.size()) { // the input is small (run.sh: -max_len), the buffer large
    auto n = ::send(sv[1], in.data() + off, in.size() - off, MSG_NOSIGNAL);
    if (n <= 0) break;
    off += static_cast<std::size_t>(n);
  }
  ::shutdown(sv[1], SHUT_WR);
  // Keep the peer open (so writes succeed) until the next input: one at a time.
  static int peer = -1;
  if (peer >= 0) ::close(peer);
  peer = sv[1];
  return sv[0];
}

/// run.sh calls each target once with ABG_FUZZ_SEEDS=DIR: it writes valid
/// inputs, made by abg's own writers, there and exits, so the seeds follow the
/// formats as they change. Returns true when it did (the caller exits).
inline const char* seeds_dir() { return std::getenv("ABG_FUZZ_SEEDS"); }

inline void write_seed(std::string_view name, std::string_view contents) {
  write_file(std::filesystem::path(seeds_dir()) / name, contents);
}

/// Set-up that must work (seeds, fixtures): says what failed and aborts.
template <class Expected>
void must(const Expected& e, const char* what) {
  if (e) return;
  std::fprintf(stderr, "fuzz set-up: %s: %s\n", what, e.error().message.c_str());
  std::abort();
}

inline std::string read_all(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

} // namespace abg::fuzz
