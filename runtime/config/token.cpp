// Cluster token files and this user's runtime folder (include/abg/token.h).
#include "abg/token.h"

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <utility>

#include <arpa/inet.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

namespace abg {

namespace {

expected<std::vector<std::uint8_t>> random_bytes(std::size_t n) {
  std::vector<std::uint8_t> out(n);
  std::size_t got = 0;
  while (got < n) {
    auto r = ::getrandom(out.data() + got, n - got, 0);
    if (r < 0) {
      if (errno == EINTR) continue;
      return fail("cannot read random bytes from the kernel: {}", std::strerror(errno));
    }
    got += static_cast<std::size_t>(r);
  }
  return out;
}

std::string hex(const std::vector<std::uint8_t>& bytes) {
  std::string out;
  for (auto b : bytes) out += fmt::format("{:02x}", b);
  return out + "\n";
}

// Writes `text` into a new file (O_EXCL) of mode 0600.
expected<void> write_private(const std::filesystem::path& file, const std::string& text) {
  int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0)
    return fail("{}: cannot create it: {}{}", file.string(), std::strerror(errno),
                errno == EEXIST ? " (a token file is never overwritten: delete it first, and give every node the "
                                  "new one)"
                                : "");
  bool ok = ::fchmod(fd, 0600) == 0 && ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) &&
            ::fsync(fd) == 0;
  int saved = errno;
  ::close(fd);
  if (!ok) {
    std::filesystem::remove(file);
    return fail("{}: cannot write it: {}", file.string(), std::strerror(saved));
  }
  return {};
}

} // namespace

expected<void> write_token_file(const std::filesystem::path& file) {
  auto key = random_bytes(token_bytes);
  if (!key) return std::unexpected(key.error());
  return write_private(file, hex(*key));
}

expected<cluster_token> read_token_file(const std::filesystem::path& file) {
  struct stat st{};
  if (::stat(file.c_str(), &st) != 0)
    return fail("token file {}: {} (make one with `abg cluster token FILE`)", file.string(), std::strerror(errno));
  if (!S_ISREG(st.st_mode)) return fail("token file {}: not a regular file", file.string());
  if ((st.st_mode & 077) != 0)
    return fail("token file {}: its group or others may read or write it (mode {:03o}); a cluster token must be "
                "private to its owner: chmod 600 {}",
                file.string(), st.st_mode & 0777, file.string());
  if (st.st_size > 4096) return fail("token file {}: {} bytes, too long for a token file", file.string(), st.st_size);
  std::ifstream in(file);
  std::stringstream text;
  text << in.rdbuf();
  if (!in) return fail("token file {}: cannot read it", file.string());
  cluster_token t;
  t.source = file.string();
  std::string digits;
  for (char c : text.str()) {
    if (std::isspace(static_cast<unsigned char>(c))) continue;
    if (!std::isxdigit(static_cast<unsigned char>(c)))
      return fail("token file {}: '{}' is not a hex digit (a token file holds hex digits, as `abg cluster token` "
                  "writes them)",
                  file.string(), c);
    digits += c;
  }
  if (digits.size() % 2 != 0 || digits.size() / 2 < min_token_bytes)
    return fail("token file {}: {} hex digits; a token needs an even number, at least {} (make one with `abg "
                "cluster token FILE`)",
                file.string(), digits.size(), 2 * min_token_bytes);
  for (std::size_t i = 0; i < digits.size(); i += 2)
    t.key.push_back(static_cast<std::uint8_t>(std::stoi(digits.substr(i, 2), nullptr, 16)));
  return t;
}

std::optional<expected<cluster_token>> named_token(const std::string& flag, const char* env,
                                                  const std::string& from_cluster) {
  if (!flag.empty()) return read_token_file(flag);
  if (const char* value = std::getenv(env); value && *value) return read_token_file(value);
  if (!from_cluster.empty()) return read_token_file(from_cluster);
  return std::nullopt;
}

expected<std::filesystem::path> user_runtime_dir() {
  std::filesystem::path dir;
  if (const char* xdg = std::getenv("XDG_RUNTIME_DIR"); xdg && *xdg && std::filesystem::is_directory(xdg))
    dir = std::filesystem::path(xdg) / "abg";
  else
    dir = fmt::format("/tmp/abg-{}", ::geteuid());
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST)
    return fail("cannot create abg's runtime folder {}: {}", dir.string(), std::strerror(errno));
  struct stat st{};
  if (::lstat(dir.c_str(), &st) != 0)
    return fail("abg's runtime folder {}: {}", dir.string(), std::strerror(errno));
  if (!S_ISDIR(st.st_mode) || st.st_uid != ::geteuid() || (st.st_mode & 077) != 0)
    return fail("abg's runtime folder {} is not a folder of this user's that only it may enter (owner {}, mode "
                "{:03o}); remove it, or give a token file with --token-file",
                dir.string(), st.st_uid, st.st_mode & 0777);
  return dir;
}

expected<cluster_token> loopback_token() {
  auto dir = user_runtime_dir();
  if (!dir) return std::unexpected(dir.error());
  auto file = *dir / "loopback.token";
  if (!std::filesystem::exists(file)) {
    // Written aside and linked into place: link() fails when another node
    // was first, and then both read the same file.
    auto key = random_bytes(token_bytes);
    if (!key) return std::unexpected(key.error());
    auto aside = *dir / fmt::format("loopback.token.{}", ::getpid());
    std::filesystem::remove(aside);
    if (auto ok = write_private(aside, hex(*key)); !ok) return std::unexpected(ok.error());
    if (::link(aside.c_str(), file.c_str()) != 0 && errno != EEXIST) {
      int saved = errno;
      std::filesystem::remove(aside);
      return fail("cannot create {}: {}", file.string(), std::strerror(saved));
    }
    std::filesystem::remove(aside);
  }
  return read_token_file(file);
}

expected<std::filesystem::path> inspector_token_file(std::uint16_t port) {
  auto dir = user_runtime_dir();
  if (!dir) return std::unexpected(dir.error());
  return *dir / fmt::format("inspector-{}.token", port);
}

run_token_file::run_token_file(std::filesystem::path path, cluster_token token, int fd)
  : path_(std::move(path)), token_(std::move(token)), fd_(fd) {}

run_token_file::run_token_file(run_token_file&& other) noexcept
  : path_(std::move(other.path_)), token_(std::move(other.token_)), fd_(std::exchange(other.fd_, -1)) {
  other.path_.clear();
}

run_token_file::~run_token_file() {
  std::error_code ec;
  if (!path_.empty()) std::filesystem::remove(path_, ec);
  if (fd_ >= 0) ::close(fd_);
}

expected<run_token_file> run_token_file::create(const std::filesystem::path& file) {
  std::error_code ec;
  std::filesystem::remove(file, ec);
  if (auto ok = write_token_file(file); !ok) return std::unexpected(ok.error());
  int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0 || ::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    int saved = errno;
    if (fd >= 0) ::close(fd);
    std::filesystem::remove(file, ec);
    return fail("{}: cannot lock it: {}", file.string(), std::strerror(saved));
  }
  auto token = read_token_file(file);
  if (!token) {
    ::close(fd);
    std::filesystem::remove(file, ec);
    return std::unexpected(token.error());
  }
  return run_token_file{file, std::move(*token), fd};
}

expected<void> run_token_file::move_to(const std::filesystem::path& to) {
  std::error_code ec;
  std::filesystem::rename(path_, to, ec);
  if (ec) return fail("cannot move {} to {}: {}", path_.string(), to.string(), ec.message());
  path_ = to;
  return {};
}

namespace {

// Whether a run's token file is there and its run alive. A live run holds
// the exclusive lock; getting a shared one means its writer is gone, and
// then the file is removed, only while the name still holds the file found
// stale: a run starting now may have just moved its own file there.
enum class run_file { missing, live, stale };

expected<run_file> probe_run_file(const std::filesystem::path& file) {
  int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return run_file::missing;
    return fail("{}: cannot open it: {}", file.string(), std::strerror(errno));
  }
  if (::flock(fd, LOCK_SH | LOCK_NB) != 0) {
    const int why = errno;
    ::close(fd);
    if (why != EWOULDBLOCK) return fail("{}: cannot test its lock: {}", file.string(), std::strerror(why));
    return run_file::live;
  }
  struct stat held{}, named{};
  if (::fstat(fd, &held) == 0 && ::stat(file.c_str(), &named) == 0 && held.st_ino == named.st_ino &&
      held.st_dev == named.st_dev) {
    std::error_code ec;
    std::filesystem::remove(file, ec);
  }
  ::close(fd);
  return run_file::stale;
}

} // namespace

expected<std::optional<cluster_token>> running_inspector_token(std::uint16_t port) {
  auto file = inspector_token_file(port);
  if (!file) return std::unexpected(file.error());
  auto state = probe_run_file(*file);
  if (!state) return std::unexpected(state.error());
  if (*state != run_file::live) return std::optional<cluster_token>{};
  auto token = read_token_file(*file);
  if (!token) return std::unexpected(token.error());
  return std::optional<cluster_token>{std::move(*token)};
}

std::size_t remove_stale_inspector_tokens() {
  auto dir = user_runtime_dir();
  if (!dir) return 0;
  std::size_t removed = 0;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(*dir, ec)) {
    const auto name = entry.path().filename().string();
    if (!name.starts_with("inspector-") || !name.ends_with(".token")) continue;
    const auto middle = name.substr(10, name.size() - 16);
    if (middle.starts_with("pid")) {
      // A run's file before its port is known: written, then locked, so
      // the lock does not tell a starting run's from a killed one's; the
      // process does.
      const auto pid = std::strtol(middle.c_str() + 3, nullptr, 10);
      if (pid > 0 && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH &&
          std::filesystem::remove(entry.path(), ec))
        ++removed;
    } else if (auto state = probe_run_file(entry.path()); state && *state == run_file::stale) {
      ++removed;
    }
  }
  return removed;
}

bool is_loopback_host(const std::string& host) {
  if (host == "localhost" || host == "ip6-localhost" || host == "::1") return true;
  in_addr a{};
  return ::inet_pton(AF_INET, host.c_str(), &a) == 1 && (ntohl(a.s_addr) >> 24) == 127;
}

} // namespace abg
