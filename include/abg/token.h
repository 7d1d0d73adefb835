// The cluster token (docs/security.md): a secret shared by the nodes of one
// cluster, kept in a file only its owner can read. Nodes prove they hold it
// by a challenge-response before any other byte (messages/handshake.h); the
// token itself never crosses the network. Files and folders only here: the
// handshake is in messages/.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "abg/error.h"

namespace abg {

struct cluster_token {
  std::vector<std::uint8_t> key;
  std::string source; // where it came from, for messages
};

/// Bytes of a new token (256 bits), and the fewest a token file may hold.
inline constexpr std::size_t token_bytes = 32;
inline constexpr std::size_t min_token_bytes = 16;

/// Writes a new random token into `file` (hex, one line), mode 0600. Refuses
/// an existing file: replacing a cluster's token locks its running nodes out.
expected<void> write_token_file(const std::filesystem::path& file);

/// Reads a token file: a regular file that neither its group nor others may
/// read or write, holding at least min_token_bytes as hex digits.
expected<cluster_token> read_token_file(const std::filesystem::path& file);

/// A token file named by a flag's value, else by the environment variable
/// `env`, else by the cluster file (`from_cluster`); none when none names one.
std::optional<expected<cluster_token>> named_token(const std::string& flag, const char* env,
                                                  const std::string& from_cluster);

/// This user's runtime folder for abg ($XDG_RUNTIME_DIR/abg, else
/// /tmp/abg-UID), created mode 0700; refused when another user owns it or
/// others may enter it.
expected<std::filesystem::path> user_runtime_dir();

/// The token nodes of this user share on loopback when no token file is
/// given: user_runtime_dir()/loopback.token, created by the first node that
/// needs it (atomically: concurrent first nodes agree on one).
expected<cluster_token> loopback_token();

/// user_runtime_dir()/inspector-PORT.token: where a single-process run whose
/// inspector listens on PORT keeps its token, and `abg console` finds it.
expected<std::filesystem::path> inspector_token_file(std::uint16_t port);

/// A single-process run's own token file: a new token (mode 0600) that the
/// run holds an exclusive flock(2) on for as long as it lives. The kernel
/// drops the lock when the process dies, even by SIGKILL, so a console tells
/// a live run's file from one a killed run left on a port reused since.
/// The file is removed when this object goes.
class run_token_file {
public:
  /// Writes a new token into `file`, replacing what a run that is gone left.
  static expected<run_token_file> create(const std::filesystem::path& file);

  run_token_file(run_token_file&& other) noexcept;
  run_token_file& operator=(run_token_file&&) = delete;
  run_token_file(const run_token_file&) = delete;
  ~run_token_file();

  const cluster_token& token() const { return token_; }
  const std::filesystem::path& path() const { return path_; }

  /// Renames the file to `to` (the lock goes with it: it is the inode's).
  expected<void> move_to(const std::filesystem::path& to);

private:
  run_token_file(std::filesystem::path path, cluster_token token, int fd);
  std::filesystem::path path_;
  cluster_token token_;
  int fd_ = -1;
};

/// The token of this user's live single-process run whose inspector listens
/// on `port` (inspector_token_file); none when no file is there, or when the
/// run that wrote it is gone: such a stale file is removed.
expected<std::optional<cluster_token>> running_inspector_token(std::uint16_t port);

/// Removes the inspector token files in user_runtime_dir() that runs now
/// gone left (killed before they could remove them), as a run starting its
/// inspector does; how many. A port's file is stale when no process holds
/// its lock; a file named after a process (before the port is known) when
/// that process is gone.
std::size_t remove_stale_inspector_tokens();

/// Whether `host` names the loopback interface ("localhost", 127.0.0.0/8, ::1).
bool is_loopback_host(const std::string& host);

} // namespace abg
