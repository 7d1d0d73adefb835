// `abg node CLUSTER CONFIG (--name NAME | --rank R)`
#include <fmt/format.h>

#include "abg/cluster.h"
#include "tools/config_options.h"
#include "tools/learn/commands.h"
#include "tools/learn/node_launch.h"

namespace abg::tools {

namespace {

struct node_args {
  std::string cluster;
  config_args config;
  std::string name;
  std::optional<std::int64_t> rank;
  bool no_fetch_data = false;
  bool check = false;
  std::string token_file;
  std::string admin_token_file;
  std::string inspect;
  std::string metrics;
};

int run(const node_args& args) {
  auto spec = read_cluster_file(args.cluster);
  if (!spec) {
    fmt::print(stderr, "error: {}\n", spec.error().message);
    return 1;
  }
  auto cfg = load_config_or_report(args.config);
  if (!cfg)
    return 1;
  std::optional<std::size_t> index;
  if (args.rank) {
    if (*args.rank < static_cast<std::int64_t>(spec->nodes.size())) index = static_cast<std::size_t>(*args.rank);
  } else {
    index = spec->find(args.name);
  }
  if (!index) {
    std::vector<std::string> names;
    for (auto& n : spec->nodes) names.push_back(n.name);
    fmt::print(stderr, "error: {} names no node {}; its nodes are {} (ranks 0 to {})\n", args.cluster,
               args.rank ? fmt::format("of rank {}", *args.rank) : "'" + args.name + "'", fmt::join(names, ", "),
               names.size() - 1);
    return 1;
  }
  if (cfg->num_machines != 1 && static_cast<std::size_t>(cfg->num_machines) != spec->count(role::trainer))
    fmt::print(stderr, "warning: num_machines = {} in the config, but {} has {} trainer node(s): the cluster file decides\n",
               cfg->num_machines, args.cluster, spec->count(role::trainer));
  node::node_options options;
  options.cluster = *spec;
  options.index = *index;
  const auto& me = spec->nodes[*index];
  options.host = me.host;
  options.port = me.port;
  const auto& coordinator = spec->nodes[spec->coordinator()];
  options.coordinator_host = coordinator.host;
  options.coordinator_port = coordinator.port;
  if (cfg->seed) options.train.seed = static_cast<std::uint64_t>(*cfg->seed);
  options.fetch_data = !args.no_fetch_data;
  options.check_only = args.check;
  // Only the coordinator's node publishes one.
  if (!apply_inspect_option(args.inspect.empty() ? spec->inspect : args.inspect, options.train)) return 1;
  if (!apply_metrics_option(args.metrics, me.has(role::coordinator), options.train)) return 1;
  return run_cluster_node(*cfg, to_toml(*cfg), std::move(options), args.token_file, args.admin_token_file);
}

} // namespace

void register_node_command(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<node_args>();
  auto* cmd = app.add_subcommand(
    "node", "Run one node of a cluster: the roles the cluster file gives it (coordinator, lock_server, trainer, "
            "partition_server, parameter_server), listening on its host and port. Nodes may start in any order; "
            "each waits for the whole cluster (cluster.join_timeout), trains, and exits 0 when training is done, "
            "non-zero naming the reason otherwise (a lost coordinator, a refused join). docs/cluster.md");
  cmd->add_option("CLUSTER", args->cluster, "The cluster file (TOML: [cluster] and [[nodes]])")
    ->required()
    ->check(CLI::ExistingFile);
  add_config_args(*cmd, args->config);
  auto* name = cmd->add_option("--name", args->name, "This node's name in the cluster file");
  auto* rank = cmd->add_option("--rank", args->rank, "This node's position in the cluster file (0-based)")
                 ->check(CLI::NonNegativeNumber);
  name->excludes(rank);
  add_no_fetch_data_flag(*cmd, args->no_fetch_data);
  add_token_file_option(*cmd, args->token_file);
  add_admin_token_option(*cmd, args->admin_token_file);
  add_inspect_option(*cmd, args->inspect);
  add_metrics_option(*cmd, args->metrics);
  cmd->add_flag("--check", args->check,
                "The pre-flight check instead of training: join as usual (abg version, config and data compared "
                "with the coordinator's, nothing fetched), then the coordinator checks each node's free memory "
                "against what it will hold and that the nodes reach each other, and prints one line per node and "
                "check; exits 0 when all passed, 1 naming what failed (`abg cluster check`)");
  cmd->callback([args, &exit_code, cmd] {
    if (args->name.empty() && !args->rank) {
      fmt::print(stderr, "error: abg node needs --name NAME or --rank R\n{}", cmd->help());
      exit_code = 1;
      return;
    }
    exit_code = run(*args);
  });
}

} // namespace abg::tools
