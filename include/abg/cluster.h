// Who runs where: the nodes of a cluster and their roles, from a TOML cluster
// file (docs/cluster.md) or PBG's layout for `--rank` launches and for the
// machines simulated in one process. Parsed and validated here, without
// actors; actors/node/ spawns what it describes.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "abg/error.h"

namespace abg {

enum class role : std::uint8_t { coordinator, lock_server, trainer, partition_server, parameter_server };

/// "coordinator", "lock_server", "trainer", "partition_server", "parameter_server".
std::string_view to_string(role r);
std::optional<role> parse_role(std::string_view name);

struct node_spec {
  std::string name;
  std::string host; // empty: learned when the node joins (PBG's ranks > 0)
  std::uint16_t port = 0;
  std::vector<role> roles;
  bool has(role r) const;
};

/// TLS between nodes (docs/security.md): PEM files, paths as the cluster
/// file names them (relative to its folder); "{name}" in a path stands for
/// the node's name, so one [tls] section serves every node.
struct tls_files {
  std::string certificate, key, ca;
  bool enabled() const { return !ca.empty(); }
  /// The files of node `name`.
  tls_files of_node(std::string_view name) const;
};

struct cluster_spec {
  std::vector<node_spec> nodes;
  /// CAF's heartbeats between nodes, and how long a silent node has before it
  /// is declared lost.
  std::chrono::milliseconds heartbeat_interval{1000};
  std::chrono::milliseconds heartbeat_timeout{5000};
  /// How long nodes wait for the whole cluster at start.
  std::chrono::milliseconds join_timeout{120000};
  /// Every request between roles.
  std::chrono::milliseconds request_timeout{60000};
  /// How long a lost partition or parameter server has to come back before
  /// every node exits (then the cluster rolls back to the last commit).
  std::chrono::milliseconds server_wait{60000};
  /// The cluster token (docs/security.md): its file, as the cluster file
  /// names it (relative to the cluster file's folder); empty: none named.
  std::string token_file;
  /// The run's admin token (docs/console.md, "Steering a run"): what `abg
  /// console --admin` proves to pause, resume, checkpoint or stop the run;
  /// read by the coordinator's node only. Empty: no console may steer it.
  std::string admin_token_file;
  /// Where the coordinator's inspector listens ("HOST:PORT"), for its node
  /// and for `abg console --cluster`; empty: loopback, a port the kernel picks.
  std::string inspect;
  /// How long a connection has from its accept to prove the token, and how
  /// many may be proving it at once (more close the longest waiting).
  std::chrono::milliseconds handshake_timeout{5000};
  std::size_t max_pending_connections = 64;
  tls_files tls; // [tls]; disabled when absent
  std::string source; // the file it came from ("" for a layout)

  /// Index of the node with that name, or of the node with the coordinator.
  std::optional<std::size_t> find(std::string_view name) const;
  std::size_t coordinator() const;
  std::size_t count(role r) const;
  /// Indices of the nodes with role r, in file order (trainer ids, server numbers).
  std::vector<std::size_t> with(role r) const;
};

/// HOST:PORT (HOST may be [IPv6]) split in two; none when malformed.
std::optional<std::pair<std::string, std::uint16_t>> parse_host_port(const std::string& text);

/// --metrics' ADDRESS:PORT (`abg train`, `abg node`, `abg cluster up`): a
/// port Prometheus can be told, so not 0; the error names the flag and the fix.
expected<std::pair<std::string, std::uint16_t>> parse_metrics_address(const std::string& text);

/// PBG's distributed_init_method: "tcp://HOST:PORT" (rank 0 listens there) or
/// "file:///PATH" (rank 0 writes its address into that file, on a filesystem
/// every machine shares).
struct init_method {
  bool file = false;
  std::string host;       // tcp
  std::uint16_t port = 0; // tcp
  std::string path;       // file
};
expected<init_method> parse_init_method(std::string_view text);

/// Reads and validates a cluster file: every problem with file:line:column.
expected<cluster_spec> read_cluster_file(const std::filesystem::path& file);

/// PBG's layout: `machines` trainer machines "rank0".."rank{M-1}", each a
/// trainer and a parameter-server shard; rank 0 also the coordinator and the
/// lock server; partition servers one per machine (num_partition_servers =
/// -1, the default), or that many dedicated nodes "rank{M}".. (> 0), or one
/// on rank 0 (0: PBG swaps through the checkpoint folder; abg keeps one
/// server on rank 0 instead).
cluster_spec pbg_layout(std::int64_t machines, std::int64_t num_partition_servers);

} // namespace abg
