// Clusters of `abg node` processes on loopback for the end-to-end tests:
// free ports, cluster files, nodes started and watched through their logs.
#pragma once

#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fmt/format.h>

#include "tests/e2e/cli.h"
#include "tests/test_util.h"

namespace abg::test {

/// A TCP port nobody listens on at the moment of asking (the kernel's pick).
inline std::uint16_t free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  socklen_t len = sizeof a;
  std::uint16_t port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0)
    port = ntohs(a.sin_port);
  ::close(fd);
  return port;
}

struct test_node {
  std::string name;
  std::vector<std::string> roles;
  std::uint16_t port = 0;
  std::string host = "127.0.0.1";
};

/// Node "a" with the coordinator, the lock server and `a_roles`; then one
/// node per entry of `others`. Heartbeats every 0.5 s, lost after 2.5 s.
inline std::vector<test_node> nodes_of(const std::vector<std::string>& a_roles,
                                       const std::vector<std::vector<std::string>>& others) {
  std::vector<test_node> out;
  std::vector<std::string> first{"coordinator", "lock_server"};
  first.insert(first.end(), a_roles.begin(), a_roles.end());
  out.push_back({"a", first, free_port()});
  char name = 'b';
  for (auto& r : others)
    out.push_back({std::string(1, name++), r, free_port()});
  return out;
}

/// With `token_file`, the cluster's token file (else nodes on loopback share
/// the user's loopback token).
inline void write_cluster_file(const std::filesystem::path& file, const std::vector<test_node>& nodes,
                               double server_wait = 60, double join_timeout = 60, const std::string& token_file = "") {
  std::string text = fmt::format("[cluster]\nheartbeat_interval = 0.5\nheartbeat_timeout = 2.5\njoin_timeout = {}\n"
                                 "request_timeout = 30\nserver_wait = {}\n",
                                 join_timeout, server_wait);
  if (!token_file.empty()) text += fmt::format("token_file = \"{}\"\n", token_file);
  for (auto& n : nodes) {
    std::string roles;
    for (auto& r : n.roles) roles += (roles.empty() ? "\"" : ", \"") + r + "\"";
    text += fmt::format("\n[[nodes]]\nname = \"{}\"\nhost = \"{}\"\nport = {}\nroles = [{}]\n", n.name, n.host,
                        n.port, roles);
  }
  write_text(file, text);
}

/// PBG's layout as a cluster file: node "a" is rank 0; every node a trainer,
/// a partition server and a parameter-server shard.
inline std::vector<test_node> pbg_nodes(int machines) {
  std::vector<std::vector<std::string>> others(static_cast<std::size_t>(machines - 1),
                                               {"trainer", "partition_server", "parameter_server"});
  return nodes_of({"trainer", "partition_server", "parameter_server"}, others);
}

/// One `abg node CLUSTER CONFIG --name NAME` process, its stderr in DIR/NAME.log.
class node_process {
public:
  node_process(const std::filesystem::path& dir, const std::string& cluster, const std::string& config,
               const std::string& name, const std::vector<std::string>& overrides, const std::string& log_suffix = "",
               const std::vector<std::string>& flags = {}, const std::vector<std::string>& wrapper = {})
      : log_(dir / (name + log_suffix + ".log")) {
    std::vector<std::string> args{"node", cluster, config, "--name", name};
    for (auto& o : overrides) {
      args.push_back("-p");
      args.push_back(o);
    }
    args.insert(args.end(), flags.begin(), flags.end());
    process_ = std::make_unique<abg_process>(args, dir, log_, wrapper);
  }
  abg_process& process() { return *process_; }
  std::string log() const { return read_file(log_); }
  bool says(const std::string& text) const { return log().find(text) != std::string::npos; }
  /// Waits until the log holds `text` (or the process exits, or `timeout`).
  bool wait_for(const std::string& text, std::chrono::seconds timeout = std::chrono::seconds(120)) {
    return process_->wait_until([&] { return says(text); }, timeout) || says(text);
  }
  /// Its exit status once exited within `timeout`, -1 when still running or killed.
  int exit_code(std::chrono::seconds timeout = std::chrono::seconds(180)) {
    auto st = process_->wait_for(timeout);
    if (!st) return -1;
    return WIFEXITED(*st) ? WEXITSTATUS(*st) : -1;
  }

private:
  std::filesystem::path log_;
  std::unique_ptr<abg_process> process_;
};

} // namespace abg::test
