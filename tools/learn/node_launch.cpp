#include "tools/learn/node_launch.h"

#include <charconv>
#include <cstdlib>
#include <cstring>

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fmt/format.h>

#include "tools/learn/stop_signal.h"
#include "tools/learn/train_output.h"

namespace abg::tools {

void add_no_fetch_data_flag(CLI::App& cmd, bool& flag) {
  cmd.add_flag("--no-fetch-data", flag,
               "A node without the coordinator checks its copy of the imported data (entity_path, edge_paths) "
               "against the coordinator node's at join and fetches the files that differ or are missing; with "
               "this flag it is refused instead, naming the first file that differs");
}

std::string local_address_towards(const std::string& host, std::uint16_t port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  if (::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found) != 0 || !found)
    return {};
  std::string out;
  // connect() on a UDP socket only picks the route and the source address.
  int fd = ::socket(found->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd >= 0 && ::connect(fd, found->ai_addr, found->ai_addrlen) == 0) {
    sockaddr_storage local{};
    socklen_t len = sizeof local;
    char text[INET6_ADDRSTRLEN] = {};
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) == 0) {
      const void* a = local.ss_family == AF_INET ? static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(&local)->sin_addr)
                                                 : static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(&local)->sin6_addr);
      if (::inet_ntop(local.ss_family, a, text, sizeof text)) out = text;
    }
  }
  if (fd >= 0) ::close(fd);
  ::freeaddrinfo(found);
  return out;
}

void add_token_file_option(CLI::App& cmd, std::string& file) {
  cmd.add_option("--token-file", file,
                 "The cluster's token file (`abg cluster token FILE` makes one; mode 0600, the same on every node). "
                 "Default: $ABG_TOKEN_FILE, else the cluster file's token_file, else, for a node on loopback, one "
                 "this user's nodes share in their runtime folder (docs/security.md)");
}

void add_inspect_option(CLI::App& cmd, std::string& value) {
  cmd.add_option("--inspect", value,
                 "Where the run's inspector listens for `abg console` (the coordinator's node only): ADDRESS:PORT, "
                 "or `none` for no port. Default: loopback, a port the kernel picks (printed at start). Guarded "
                 "by the cluster token, or in one process by a token written to this user's runtime folder "
                 "(docs/console.md)");
}

void add_metrics_option(CLI::App& cmd, std::string& value) {
  cmd.add_option("--metrics", value,
                 "Serve the run's counters (edges trained per trainer, bytes per node and node pair, memory) in "
                 "Prometheus' text format at http://ADDRESS:PORT/metrics, for a Prometheus server and Grafana "
                 "(the coordinator's node: it gathers the cluster's). "
                 "Counters only, no names or tensors, and no token: keep it on loopback or a trusted network "
                 "(docs/console.md, \"Metrics\")");
}

bool apply_metrics_option(const std::string& value, bool hosts_coordinator, node::train_options& options) {
  if (value.empty()) return true;
  auto at = parse_metrics_address(value);
  if (!at) {
    fmt::print(stderr, "error: {}\n", at.error().message);
    return false;
  }
  if (!hosts_coordinator) {
    fmt::print(stderr, "error: --metrics: this node does not host the coordinator; give --metrics to the node that "
                       "does (rank 0): it serves the whole cluster's counters\n");
    return false;
  }
  options.metrics_host = at->first;
  options.metrics_port = at->second;
  return true;
}

bool apply_inspect_option(const std::string& value, node::train_options& options) {
  if (value.empty()) return true;
  if (value == "none") {
    options.inspect_host.clear();
    return true;
  }
  auto at = parse_host_port(value);
  if (!at) {
    fmt::print(stderr, "error: --inspect {}: give ADDRESS:PORT (127.0.0.1:0 for loopback and any port), or none\n",
               value);
    return false;
  }
  options.inspect_host = at->first;
  options.inspect_port = at->second;
  return true;
}

void add_admin_token_option(CLI::App& cmd, std::string& file) {
  cmd.add_option("--admin-token-file", file,
                 "The run's admin token file (`abg cluster token FILE` makes one; another than the cluster's): "
                 "with it `abg console --admin` may pause, resume, checkpoint and stop the run. Default: "
                 "$ABG_ADMIN_TOKEN_FILE, else the cluster file's admin_token_file, else none: no console may "
                 "steer the run (docs/console.md)");
}

bool apply_admin_token(const std::string& flag, const std::string& from_cluster, const cluster_token* cluster,
                       node::train_options& options) {
  auto token = named_token(flag, "ABG_ADMIN_TOKEN_FILE", from_cluster);
  if (!token) return true;
  if (!*token) {
    fmt::print(stderr, "error: the admin token: {}\n", token->error().message);
    return false;
  }
  if (cluster && (*token)->key == cluster->key) {
    fmt::print(stderr, "error: the admin token {} is the cluster token: every node holds that one, so give admin "
                       "consoles a token of their own (`abg cluster token FILE`)\n",
               (*token)->source);
    return false;
  }
  options.admin_token = std::move(**token);
  return true;
}

namespace {

expected<cluster_token> node_token(const node::node_options& options, const std::string& flag) {
  if (auto named = named_token(flag, "ABG_TOKEN_FILE", options.cluster.token_file)) return std::move(*named);
  const auto& me = options.cluster.nodes.at(options.index);
  bool loopback = is_loopback_host(options.host) &&
                  (options.coordinator_host.empty() || is_loopback_host(options.coordinator_host));
  if (loopback) return loopback_token();
  return fail("node {} listens on {}, beyond loopback, and has no cluster token: make one with `abg cluster token "
              "FILE`, copy it to every node (mode 0600), and name it in the cluster file ([cluster] token_file) or "
              "give it with --token-file FILE or ABG_TOKEN_FILE (docs/security.md)",
              me.name, options.host.empty() ? "every interface" : options.host);
}

} // namespace

int run_cluster_node(const config& cfg, const std::string& config_toml, node::node_options options,
                     const std::string& token_file, const std::string& admin_token_file) {
  const auto& me = options.cluster.nodes.at(options.index);
  const auto& name = me.name;
  auto token = node_token(options, token_file);
  if (!token) {
    fmt::print(stderr, "[{}] error: {}\n", name, token.error().message);
    return 1;
  }
  // Only the coordinator's node checks admin commands (its inspector).
  if (me.has(role::coordinator) &&
      !apply_admin_token(admin_token_file, options.cluster.admin_token_file, &*token, options.train))
    return 1;
  options.token = std::move(*token);
  train_output output(fmt::format("[{}] ", name));
  options.train.stop = &install_stop_signals();
  auto r = node::run_node(cfg, config_toml, options, output.callbacks());
  output.finish();
  if (r.summary && !options.check_only) output.summary(*r.summary, cfg);
  if (r.stopped) {
    fmt::print(stderr, "[{}] stopped by a signal; the last committed checkpoint stays the resume point\n", name);
    return stopped_exit_code();
  }
  if (r.exit_code != 0) {
    fmt::print(stderr, "[{}] error: {}\n", name, r.message);
    return r.exit_code;
  }
  if (!r.summary) fmt::print(stderr, "[{}] {}\n", name, r.message.empty() ? "training is done" : r.message);
  return 0;
}

} // namespace abg::tools
