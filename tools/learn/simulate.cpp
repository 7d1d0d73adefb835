// `abg simulate`: what a cluster in PBG's layout would do with the config's
// graph, per machine count (runtime/simulate/cluster_sim.h, docs/scaling.md).
// In abg-learn: without a given or recorded speed it times the kernel itself.
#include <algorithm>
#include <fstream>
#include <memory>
#include <optional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "abg/units.h"
#include "runtime/simulate/graph_of.h"
#include "runtime/train/kernel_rate.h"
#include "tools/config_options.h"
#include "tools/learn/commands.h"

namespace abg::tools {

namespace {

struct simulate_args {
  config_args config;
  std::vector<std::int32_t> machines{1, 2, 4, 8};
  std::string bandwidth = "10Gbit", latency = "100us", disk = "1GB";
  double edges_per_second = 0;
  bool short_run = false;
  std::int32_t host_cores = 0;
  std::optional<std::int64_t> buffer_capacity;
  std::uint64_t entities = 0, edges = 0;
  bool json = false;
};

// How long the short run of the kernel trains (after a warm-up pass).
constexpr double short_run_seconds = 3.0;

// One trainer's kernel rate from the config's checkpoint: the edges and
// seconds of every iteration in training_stats.json (nullopt: no such file).
expected<std::optional<std::pair<double, std::size_t>>> recorded_rate(const config& cfg) {
  const auto file = std::filesystem::path(cfg.checkpoint_path) / "training_stats.json";
  std::ifstream in(file);
  if (!in) return std::nullopt;
  double edges = 0, seconds = 0;
  std::size_t lines = 0;
  for (std::string line; std::getline(in, line);) {
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.contains("edges") || !j.contains("seconds")) continue;
    edges += j["edges"].get<double>();
    seconds += j["seconds"].get<double>();
    ++lines;
  }
  if (lines == 0 || seconds <= 0 || edges <= 0)
    return fail("{} holds no iteration with edges and seconds; give --edges-per-second", file.string());
  return std::pair{edges / seconds, lines};
}

void run(const simulate_args& args, int& exit_code) {
  auto fail_with = [&exit_code](const std::string& why) {
    fmt::print(stderr, "error: {}\n", why);
    exit_code = 1;
  };
  auto config = args.config;
  // After the -p overrides, so that it wins; validated as the config key is.
  if (args.buffer_capacity) config.overrides.push_back(fmt::format("buffer_capacity={}", *args.buffer_capacity));
  auto cfg = load_config_or_report(config);
  if (!cfg) {
    exit_code = 1;
    return;
  }
  if ((args.entities == 0) != (args.edges == 0))
    return fail_with("--entities and --edges go together (a graph that is not imported); give both or neither");
  std::optional<simulate::graph_size> size;
  if (args.entities > 0) size = simulate::graph_size{args.entities, args.edges};
  auto graph = simulate::graph_of(*cfg, size);
  if (!graph) return fail_with(graph.error().message);
  simulate::cluster_model cluster;
  auto bandwidth = parse_rate(args.bandwidth);
  if (!bandwidth) return fail_with("--bandwidth " + bandwidth.error().message);
  auto latency = parse_duration(args.latency);
  if (!latency) return fail_with("--latency " + latency.error().message);
  auto disk = parse_rate(args.disk);
  if (!disk) return fail_with("--disk " + disk.error().message);
  cluster.bandwidth = *bandwidth;
  cluster.latency = *latency;
  cluster.disk_bandwidth = *disk;
  cluster.local_checkpoints = cfg->checkpoint_mode == "local";
  if (args.host_cores < 0) return fail_with(fmt::format("--host-cores {}: give a number of cores, or 0", args.host_cores));
  cluster.host_cores = args.host_cores;
  std::string rate_source = "given";
  if (args.edges_per_second > 0 && args.short_run)
    return fail_with("--edges-per-second and --short-run both set the kernel's speed; give one");
  std::optional<std::pair<double, std::size_t>> recorded;
  if (args.edges_per_second <= 0 && !args.short_run) {
    auto r = recorded_rate(*cfg);
    if (!r) return fail_with(r.error().message);
    recorded = *r;
  }
  if (args.edges_per_second > 0) {
    cluster.edges_per_second = args.edges_per_second;
  } else if (recorded) {
    cluster.edges_per_second = recorded->first;
    rate_source = fmt::format("measured: {} iteration(s) of training_stats.json", recorded->second);
  } else {
    // Each call of the kernel a mean bucket's edges, as an epoch calls it.
    std::uint64_t all = 0, filled = 0;
    for (auto e : graph->bucket_edges) {
      all += e;
      filled += e > 0 ? 1 : 0;
    }
    const auto bucket = filled > 0 ? static_cast<std::int64_t>(all / filled) : 0;
    auto rate =
      train::measure_kernel_rate(*cfg, graph->partition_rows, graph->relation_ids, bucket, short_run_seconds);
    if (!rate) return fail_with("the short run of the kernel: " + rate.error().message);
    cluster.edges_per_second = rate->edges_per_second;
    rate_source = fmt::format("measured: a short run of the kernel, {} edges in {:.1f} s with {} worker(s){}",
                              rate->edges, rate->seconds, rate->workers,
                              rate->capped ? ", on tables smaller than the partitions" : "");
  }
  for (auto m : args.machines)
    if (m < 1) return fail_with(fmt::format("--machines {}: a cluster has at least 1 machine", m));

  std::uint64_t edges = 0, largest = 0;
  for (auto e : graph->bucket_edges) edges += e;
  for (auto& side : graph->partition_bytes)
    for (auto b : side) largest = std::max(largest, b);
  if (cfg->checkpoint_every_buckets > 0)
    fmt::print(stderr,
               "note: checkpoint_every_buckets = {} is not modelled: the figures are those of one commit per "
               "iteration; each commit within an iteration also drains the trainers, which then load their "
               "partitions again\n",
               cfg->checkpoint_every_buckets);
  nlohmann::json out = nlohmann::json::array();
  if (!args.json) {
    fmt::print("{}x{} buckets ({}), {} edges per epoch, partitions up to {}, shared parameters {}\n", graph->schedule.nparts_lhs,
               graph->schedule.nparts_rhs, schedule::to_string(graph->schedule.order), edges, size_text(largest),
               size_text(graph->shared_bytes));
    fmt::print("one trainer {:.0f} edges/s ({}); links {:.3g} GB/s each way, latency {:g} us; disk {:.3g} GB/s; "
               "checkpoint_mode {}\n",
               cluster.edges_per_second, rate_source, cluster.bandwidth / 1e9, cluster.latency * 1e6,
               cluster.disk_bandwidth / 1e9, cfg->checkpoint_mode);
    fmt::print("a steady-state epoch (not the first), PBG's layout{}:\n",
               cluster.host_cores > 0 ? fmt::format(", every machine on one host of {} cores", cluster.host_cores) : "");
    fmt::print("{:>9} {:>11} {:>9} {:>6} {:>13} {:>14} {:>11} {:>11}\n", "machines", "epoch (s)", "speed-up", "idle",
               "net/machine", "memory/machine", "loads", "io wait (s)");
  }
  std::vector<simulate::epoch_figures> runs;
  for (auto m : args.machines) {
    cluster.machines = m;
    runs.push_back(simulate::simulate_epoch(*graph, cluster));
  }
  // Speed-up against one machine, simulated the same way (once).
  auto single = std::find(args.machines.begin(), args.machines.end(), 1);
  cluster.machines = 1;
  const double one = single != args.machines.end()
                       ? runs[static_cast<std::size_t>(single - args.machines.begin())].seconds
                       : simulate::simulate_epoch(*graph, cluster).seconds;
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const auto m = args.machines[i];
    const auto& f = runs[i];
    std::uint64_t net = 0, memory = 0;
    std::int64_t loads = 0, read_ahead = 0;
    double idle = 0, waited = 0;
    for (auto& x : f.machines) {
      read_ahead += x.read_ahead;
      waited = std::max(waited, x.waited_seconds);
      net = std::max(net, x.bytes_sent + x.bytes_received);
      memory = std::max(memory, x.memory_bytes);
      loads += x.loads;
      idle += x.idle_fraction / m;
    }
    const double up = f.seconds > 0 ? one / f.seconds : 0;
    if (args.json) {
      out.push_back({{"machines", m},         {"epoch_seconds", f.seconds}, {"training_seconds", f.training_seconds},
                     {"commit_seconds", f.commit_seconds}, {"speedup", up}, {"idle_fraction", idle},
                     {"network_bytes_per_machine", net},   {"memory_bytes_per_machine", memory},
                     {"loads", loads},                     {"read_ahead", read_ahead},
                     {"io_wait_seconds", waited},          {"swap_bytes", f.swap_bytes},
                     {"kernel_edges_per_second", cluster.edges_per_second}});
    } else {
      fmt::print("{:>9} {:>11.2f} {:>9.2f} {:>5.0f}% {:>13} {:>14} {:>11} {:>11.2f}\n", m, f.seconds, up, 100 * idle,
                 size_text(net), size_text(memory), loads, waited);
    }
  }
  if (args.json) fmt::print("{}\n", out.dump(2));
}

} // namespace

void register_simulate_command(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<simulate_args>();
  auto* cmd = app.add_subcommand(
    "simulate", "Predict an epoch of the config's graph on clusters of several sizes in PBG's layout: a discrete-event "
                "model driving the real bucket scheduler, with the kernel's measured speed and modelled links "
                "(docs/scaling.md)");
  add_config_args(*cmd, args->config);
  cmd->add_option("--machines", args->machines, "Machine counts to simulate, e.g. 1,2,4,8")
    ->delimiter(',')
    ->capture_default_str();
  cmd->add_option("--bandwidth", args->bandwidth, "Each machine's link, each way: 10Gbit, 1gbit, 1.25GB, ...")
    ->capture_default_str();
  cmd->add_option("--latency", args->latency, "Per transfer and per lock-server round trip: 100us, 1ms, ...")
    ->capture_default_str();
  cmd->add_option("--disk", args->disk,
                  "A machine's disk speed: checkpoint writes, and with buffer_capacity the partition store's reads "
                  "and writes: 1GB, 500MB, ...")
    ->capture_default_str();
  cmd->add_option("--edges-per-second", args->edges_per_second,
                  "One trainer's kernel speed (default: the checkpoint's training_stats.json, else a short run)");
  cmd->add_flag("--short-run", args->short_run,
                "Measure the kernel's speed with a short run (a few seconds of the config's model on random edges "
                "and tables of its partitions' size) even when the checkpoint has training_stats.json");
  cmd->add_option("--host-cores", args->host_cores,
                  "All machines are processes on one host with this many cores (a cluster on loopback): kernels "
                  "running at once share them (default 0: every machine has its own)");
  cmd->add_option("--buffer-capacity", args->buffer_capacity,
                  "Partitions each trainer holds in memory, the rest on its partition server's disk (the config's "
                  "buffer_capacity; 0: no limit, all in memory)");
  cmd->add_option("--entities", args->entities,
                  "A graph that is not imported: entities per entity type (with --edges)");
  cmd->add_option("--edges", args->edges, "A graph that is not imported: edges (with --entities)");
  cmd->add_flag("--json", args->json, "One JSON document: a row per machine count");
  cmd->callback([args, &exit_code] { run(*args, exit_code); });
}

} // namespace abg::tools
