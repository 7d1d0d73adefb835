// Running this process as one node of a cluster (`abg node`, `abg train
// --rank`): the node's output prefixed with its name, its exit status.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include <CLI/CLI.hpp>

#include "abg/config.h"
#include "abg/node/run.h"

namespace abg::tools {

/// Runs the node and returns the process's exit status: 0 when training is
/// done, 128 + the signal when stopped by one, 1 on every failure (the
/// message printed names it). The cluster token comes from `token_file`
/// (--token-file), else ABG_TOKEN_FILE, else the cluster file's token_file,
/// else, for a node on loopback, this user's shared loopback token.
/// The admin token (`admin_token_file`: --admin-token-file) is read on the
/// coordinator's node only (apply_admin_token).
int run_cluster_node(const config& cfg, const std::string& config_toml, node::node_options options,
                     const std::string& token_file, const std::string& admin_token_file);

/// --admin-token-file, for `abg train` and `abg node`.
void add_admin_token_option(CLI::App& cmd, std::string& file);

/// Reads the run's admin token into `options`: --admin-token-file, else
/// ABG_ADMIN_TOKEN_FILE, else the cluster file's admin_token_file (none: no
/// console may steer). False, with the error printed, for an unreadable
/// token file or one equal to the cluster token (`cluster`, if any).
bool apply_admin_token(const std::string& flag, const std::string& from_cluster, const cluster_token* cluster,
                       node::train_options& options);

/// --token-file, for `abg node` and `abg train --rank`.
void add_token_file_option(CLI::App& cmd, std::string& file);

/// --inspect ADDRESS:PORT (or none), for `abg train` and `abg node`.
void add_inspect_option(CLI::App& cmd, std::string& value);

/// Puts --inspect's value into `options` (empty: the default, loopback with a
/// port the kernel picks); false, with the error printed, when malformed.
bool apply_inspect_option(const std::string& value, node::train_options& options);

/// --metrics ADDRESS:PORT, for `abg train` and `abg node`.
void add_metrics_option(CLI::App& cmd, std::string& value);

/// Puts --metrics' value into `options`; false, with the error printed, when
/// malformed or given to a node that does not host the coordinator (whose
/// node serves the whole cluster's counters).
bool apply_metrics_option(const std::string& value, bool hosts_coordinator, node::train_options& options);

/// --no-fetch-data, for `abg node` and `abg train --rank`.
void add_no_fetch_data_flag(CLI::App& cmd, bool& flag);

/// The address of this machine's interface that routes to host (for a node
/// to advertise itself to the others); empty when there is none. Asks the
/// kernel's routing table only: nothing is sent.
std::string local_address_towards(const std::string& host, std::uint16_t port);

} // namespace abg::tools
