// `abg cluster up CLUSTER CONFIG`: every node of the cluster file whose host
// is this machine, as child processes (`abg node ... --name NAME`), their
// output prefixed with the node's name; exits with the worst exit status.
// `abg cluster check CLUSTER CONFIG`: the same nodes with `--check`.
// `abg cluster token FILE`: a new cluster token.
// `abg cluster certs CLUSTER OUTDIR`: a CA and a certificate per node.
#include <filesystem>

#include <fmt/format.h>

#include "abg/certs.h"
#include "abg/cluster.h"
#include "abg/token.h"
#include "tools/child_processes.h"
#include "tools/commands.h"
#include "tools/local_host.h"

namespace abg::tools {

namespace {

struct up_args {
  std::string cluster, config;
  std::vector<std::string> overrides;
  std::string metrics; // --metrics: for the coordinator's node
  bool check = false; // `cluster check`: the nodes run the pre-flight check
};

int run_up(const up_args& args) {
  auto spec = read_cluster_file(args.cluster);
  if (!spec) {
    fmt::print(stderr, "error: {}\n", spec.error().message);
    return 1;
  }
  const std::string* metrics_node = nullptr; // the coordinator's node's name, with --metrics
  if (!args.metrics.empty() && !spec->nodes.empty()) {
    const auto& coordinator = spec->nodes.at(spec->coordinator());
    if (auto at = parse_metrics_address(args.metrics); !at) {
      fmt::print(stderr, "error: {}\n", at.error().message);
      return 1;
    }
    if (!is_local_host(coordinator.host)) {
      fmt::print(stderr, "error: --metrics: the coordinator's node {} runs on {}, not here; give --metrics to its "
                         "`abg node` there (it serves the whole cluster's counters)\n",
                 coordinator.name, coordinator.host);
      return 1;
    }
    metrics_node = &coordinator.name;
  }
  std::error_code ec;
  auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  auto abg = ec ? std::filesystem::path("abg") : self;
  std::vector<child_spec> children;
  std::vector<std::string> elsewhere;
  for (const auto& n : spec->nodes) {
    if (!is_local_host(n.host)) {
      elsewhere.push_back(fmt::format("{} ({})", n.name, n.host));
      continue;
    }
    child_spec c;
    c.label = n.name;
    c.argv = {abg.string(), "node", args.cluster, args.config, "--name", n.name};
    for (auto& o : args.overrides) {
      c.argv.push_back("-p");
      c.argv.push_back(o);
    }
    if (args.check) c.argv.push_back("--check");
    if (metrics_node && n.name == *metrics_node) {
      c.argv.push_back("--metrics");
      c.argv.push_back(args.metrics);
    }
    children.push_back(std::move(c));
  }
  if (children.empty()) {
    fmt::print(stderr, "error: no node of {} is on this machine; start `abg node {} CONFIG --name NAME` on each "
                       "node's host\n",
               args.cluster, args.cluster);
    return 1;
  }
  if (!elsewhere.empty())
    fmt::print(stderr, "cluster up: starting {} node(s) here; start the others on their hosts: {}\n", children.size(),
               fmt::join(elsewhere, ", "));
  return run_children(children);
}

} // namespace

void register_cluster_command(CLI::App& app) {
  auto* cluster = app.add_subcommand("cluster", "Work with a cluster file (docs/cluster.md): start its nodes on this "
                                                "machine, or check it before a run.");
  cluster->require_subcommand(1);
  auto args = std::make_shared<up_args>();
  auto* up = cluster->add_subcommand(
    "up", "Start every node of CLUSTER whose host is this machine as `abg node CLUSTER CONFIG --name NAME` child "
          "processes, each line of their output prefixed with the node's name; SIGINT and SIGTERM go to every "
          "node. Exits with the worst exit status of the nodes (0 when training is done).");
  up->add_option("CLUSTER", args->cluster, "The cluster file")->required()->check(CLI::ExistingFile);
  up->add_option("CONFIG", args->config, "The training config (the same for every node)")
    ->required()
    ->check(CLI::ExistingFile);
  up->add_option("-p,--param", args->overrides, "KEY=VALUE override of the config, passed to every node");
  up->add_option("--metrics", args->metrics,
                 "ADDRESS:PORT: the coordinator's node serves the cluster's counters there in Prometheus' text "
                 "format (`abg node --metrics`; docs/console.md, \"Metrics\")");
  up->callback([args] { exit_code() = run_up(*args); });

  auto check_args = std::make_shared<up_args>();
  check_args->check = true;
  auto* check = cluster->add_subcommand(
    "check", "The pre-flight check before a run (docs/cluster.md): starts every node of CLUSTER whose host is this "
             "machine as `abg node CLUSTER CONFIG --name NAME --check` (start `abg node ... --check` on the other "
             "machines). Each node joins as for a run: reachable, the same abg version and config, the same data "
             "(compared file by file with the coordinator's, nothing fetched). Then the coordinator checks each "
             "node's free memory against the partitions and tables it will hold, and that the nodes reach each "
             "other, and prints one line per node and check. Nothing is trained. Exits 0 when every check passed, "
             "else 1 with the failures named.");
  check->add_option("CLUSTER", check_args->cluster, "The cluster file")->required()->check(CLI::ExistingFile);
  check->add_option("CONFIG", check_args->config, "The training config (the same for every node)")
    ->required()
    ->check(CLI::ExistingFile);
  check->add_option("-p,--param", check_args->overrides, "KEY=VALUE override of the config, passed to every node");
  check->callback([check_args] { exit_code() = run_up(*check_args); });

  auto token_file = std::make_shared<std::string>();
  auto* token = cluster->add_subcommand(
    "token", "Write a new random cluster token into FILE (mode 0600; an existing file is never replaced). Copy it "
             "to every node and name it in the cluster file ([cluster] token_file) or with --token-file: nodes "
             "prove they hold it before anything else, and refuse every connection that does not "
             "(docs/security.md).");
  token->add_option("FILE", *token_file, "The token file to create")->required();
  token->callback([token_file] {
    if (auto ok = write_token_file(*token_file); !ok) {
      fmt::print(stderr, "error: {}\n", ok.error().message);
      exit_code() = 1;
      return;
    }
    fmt::print("wrote a new cluster token to {} (mode 0600)\n", *token_file);
  });

  struct certs_args {
    std::string cluster, outdir;
    int days = 365;
  };
  auto certs_args_ = std::make_shared<certs_args>();
  auto* certs = cluster->add_subcommand(
    "certs", "Make a new CA and, for every node of CLUSTER, a certificate naming its host, signed by that CA, with "
             "its key, in OUTDIR (ca.pem, ca.key, NAME.pem, NAME.key; keys mode 0600, P-256), for trying TLS between "
             "nodes out: [tls] certificate = \"OUTDIR/{name}.pem\", key = \"OUTDIR/{name}.key\", ca = "
             "\"OUTDIR/ca.pem\" in the cluster file. Keep ca.key off the nodes. Never replaces a file. For "
             "production, use your own PKI (docs/security.md).");
  certs->add_option("CLUSTER", certs_args_->cluster, "The cluster file")->required()->check(CLI::ExistingFile);
  certs->add_option("OUTDIR", certs_args_->outdir, "Where to write them (created)")->required();
  certs->add_option("--days", certs_args_->days, "Validity of the node certificates in days (0: expired at once, "
                                                 "to try a refusal)")
    ->check(CLI::NonNegativeNumber);
  certs->callback([certs_args_] {
    auto spec = read_cluster_file(certs_args_->cluster);
    if (!spec) {
      fmt::print(stderr, "error: {}\n", spec.error().message);
      exit_code() = 1;
      return;
    }
    auto written = write_cluster_certificates(*spec, certs_args_->outdir, certs_args_->days);
    if (!written) {
      fmt::print(stderr, "error: {}\n", written.error().message);
      exit_code() = 1;
      return;
    }
    std::vector<std::string> names;
    for (const auto& f : *written) names.push_back(f.filename().string());
    fmt::print("wrote a CA and {} node certificate(s) into {}: {}\n", spec->nodes.size(), certs_args_->outdir,
               fmt::join(names, ", "));
  });
}

} // namespace abg::tools
