// `abg train CONFIG [-p key=value]... [--rank R [--advertise HOST]]`
#include <unistd.h>

#include <fmt/format.h>

#include "abg/node/run.h"
#include "tools/config_options.h"
#include "tools/learn/commands.h"
#include "tools/learn/node_launch.h"
#include "tools/learn/stop_signal.h"
#include "tools/learn/train_output.h"

namespace abg::tools {

namespace {

struct train_args {
  config_args config;
  std::optional<std::int64_t> rank;
  std::string advertise;
  bool no_fetch_data = false;
  std::string token_file;
  std::string admin_token_file;
  std::string inspect;
  std::string metrics;
};

int run_single_process(const config& cfg, const train_args& args) {
  train_output output;
  node::train_options options;
  if (!apply_inspect_option(args.inspect, options)) return 1;
  if (!apply_metrics_option(args.metrics, true, options)) return 1;
  if (!apply_admin_token(args.admin_token_file, "", nullptr, options)) return 1;
  if (cfg.seed)
    options.seed = static_cast<std::uint64_t>(*cfg.seed);
  options.stop = &install_stop_signals();
  auto summary = node::run_simulation(cfg, to_toml(cfg), options, output.callbacks());
  output.finish();
  if (!summary) {
    fmt::print(stderr, "error: {}\n", summary.error().message);
    return 1;
  }
  output.summary(*summary, cfg);
  return summary->stopped ? stopped_exit_code() : 0;
}

// PBG's way: every machine runs `abg train CONFIG --rank R`; the layout
// follows num_machines and num_partition_servers, rank 0 is found through
// distributed_init_method.
int run_rank(const config& cfg, std::int64_t rank, const train_args& args) {
  const auto& advertise = args.advertise;
  if (!cfg.distributed_init_method) {
    fmt::print(stderr, "error: --rank needs distributed_init_method in the config (tcp://HOST:PORT, where rank 0 "
                       "listens, or file:///PATH on a filesystem every machine shares)\n");
    return 1;
  }
  auto method = parse_init_method(*cfg.distributed_init_method);
  if (!method) {
    fmt::print(stderr, "error: {}\n", method.error().message);
    return 1;
  }
  node::node_options options;
  options.cluster = pbg_layout(cfg.num_machines, cfg.num_partition_servers);
  if (rank < 0 || rank >= static_cast<std::int64_t>(options.cluster.nodes.size())) {
    fmt::print(stderr, "error: --rank {} is outside this layout: num_machines = {} and num_partition_servers = {} give "
                       "ranks 0 to {}\n",
               rank, cfg.num_machines, cfg.num_partition_servers, options.cluster.nodes.size() - 1);
    return 1;
  }
  options.index = static_cast<std::size_t>(rank);
  if (cfg.seed)
    options.train.seed = static_cast<std::uint64_t>(*cfg.seed);
  if (rank == 0) {
    if (method->file) {
      char host[256] = {};
      ::gethostname(host, sizeof host - 1);
      options.host = advertise.empty() ? host : advertise;
      options.rendezvous_file = method->path;
    } else {
      options.host = method->host;
      options.port = method->port;
    }
  } else {
    if (method->file) {
      options.rendezvous_file = method->path;
    } else {
      options.coordinator_host = method->host;
      options.coordinator_port = method->port;
    }
    // Advertise the interface that routes to rank 0 (a file:// rank 0's
    // address is known once it is written: then loopback is a safe default
    // only when rank 0 is on this machine, so say it).
    options.host = advertise;
    if (options.host.empty() && !method->file) options.host = local_address_towards(method->host, method->port);
    if (options.host.empty()) {
      fmt::print(stderr, "error: rank {} cannot tell which of its addresses the others reach it at; give it with "
                         "--advertise HOST\n",
                 rank);
      return 1;
    }
  }
  options.fetch_data = !args.no_fetch_data;
  if (!apply_inspect_option(args.inspect, options.train)) return 1;
  if (!apply_metrics_option(args.metrics, rank == 0, options.train)) return 1;
  return run_cluster_node(cfg, to_toml(cfg), std::move(options), args.token_file, args.admin_token_file);
}

} // namespace

void register_train_command(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<train_args>();
  auto* cmd = app.add_subcommand(
    "train", "Train embeddings as configured, like PBG's torchbiggraph_train: for each epoch, edge path and edge "
             "chunk, every bucket through the actor graph (lock server, partition servers, parameter servers, "
             "trainers), then a checkpoint. Without --rank, num_machines machines are simulated in this process. "
             "With --rank R this process is rank R of a cluster launched PBG's way (every machine runs `abg train "
             "CONFIG --rank R`; rank 0 is found through distributed_init_method). A run started again resumes from "
             "the last committed checkpoint; with early_stopping it ends after the first epoch whose held-out loss "
             "rose. SIGINT/SIGTERM stop between batches and keep the last committed one (the interrupted iteration "
             "is redone on resume), then exit with status 128 + the signal number (130, 143).");
  add_config_args(*cmd, args->config);
  cmd->add_option("--rank", args->rank,
                  "This process's rank in PBG's layout: 0 to num_machines - 1 are trainer machines (rank 0 also "
                  "the lock server and coordinator), num_machines and up the dedicated partition servers when "
                  "num_partition_servers > 0")
    ->check(CLI::NonNegativeNumber);
  add_no_fetch_data_flag(*cmd, args->no_fetch_data);
  add_token_file_option(*cmd, args->token_file);
  add_admin_token_option(*cmd, args->admin_token_file);
  add_inspect_option(*cmd, args->inspect);
  add_metrics_option(*cmd, args->metrics);
  cmd->add_option("--advertise", args->advertise,
                  "With --rank: the address the other ranks reach this one at (default: for rank 0 the host of a "
                  "tcp:// init method, or this machine's name; for the others the interface that routes to rank 0)");
  cmd->callback([args, &exit_code] {
    auto cfg = load_config_or_report(args->config);
    if (!cfg) {
      exit_code = 1;
      return;
    }
    if ((!args->advertise.empty() || args->no_fetch_data || !args->token_file.empty()) && !args->rank) {
      fmt::print(stderr, "error: --advertise, --no-fetch-data and --token-file go with --rank\n");
      exit_code = 1;
      return;
    }
    exit_code = args->rank ? run_rank(*cfg, *args->rank, *args) : run_single_process(*cfg, *args);
  });
}

} // namespace abg::tools
