// Running a training: PBG's loop (epoch -> edge path -> edge chunk ->
// buckets) through the roles of actors/ (coordinator, lock server,
// trainers, partition and parameter servers), assembled into nodes by
// actors/node/. One process (`abg train`: every node of PBG's layout of
// num_machines machines in one actor system) and a cluster of processes
// (`abg node`, `abg train --rank`: one node each) run the same role code.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "abg/cluster.h"
#include "abg/config.h"
#include "abg/error.h"
#include "abg/eval/metrics.h"
#include "abg/token.h"

namespace abg::node {

struct train_options {
  /// abg extension: seeds shuffling, negatives and initialisation; random
  /// (and printed) when absent. workers = 1 with a seed is reproducible.
  std::optional<std::uint64_t> seed;
  /// Set from a signal handler: the node's main thread tells the coordinator
  /// (a message), the kernels stop at their next batch and the run returns;
  /// the interrupted iteration is not committed, so the last committed
  /// checkpoint stays the resume point and a new run redoes it.
  const std::atomic<bool>* stop = nullptr;
  /// One process: every request and reply to the lock, partition and
  /// parameter servers goes through CAF's binary serializer and back
  /// (tensors through the Cap'n Proto codec), as between machines
  /// (actors/wire_relay.h). For tests of the wire format in one process.
  bool over_the_wire = false;
  /// Where the run's inspector listens for `abg console` (the coordinator's
  /// node only; port 0: the kernel picks); an empty host: nowhere. A node of
  /// a cluster guards it with the cluster token, one process with a token it
  /// writes to this user's runtime folder (docs/console.md).
  std::string inspect_host = "127.0.0.1";
  std::uint16_t inspect_port = 0;
  /// `--metrics`: where the coordinator's node serves the run's counters in
  /// Prometheus' text format (docs/console.md, "Metrics"); an empty host:
  /// nowhere (the default).
  std::string metrics_host;
  std::uint16_t metrics_port = 0;
  /// The run's admin token (the coordinator's node only): with it, `abg
  /// console --admin` may pause, resume, checkpoint and stop the run; none:
  /// no console may (docs/console.md, "Steering a run").
  std::optional<cluster_token> admin_token;
};

struct iteration_report {
  std::int64_t epoch = 0, edge_path = 0, edge_chunk = 0;
  std::int64_t iteration = 0, iterations = 0;
  std::int64_t edges = 0, buckets = 0;
  double loss = 0;    // mean loss per edge
  double seconds = 0; // wall time of the iteration
  /// Summed over the iteration's buckets: time the trainers' kernels ran,
  /// and time they waited for partitions (written back and fetched before a
  /// kernel, or written back and read ahead beside it and outlasting it).
  double kernel_seconds = 0, swap_seconds = 0;
  /// Partitions the trainers loaded for the buckets, and of them those a
  /// buffer read ahead beside the bucket before (grant::ahead).
  std::int64_t loads = 0, read_ahead = 0;
  std::int64_t checkpoint_version = 0;
  /// eval_fraction > 0: the held-out edges of every bucket of the iteration,
  /// ranked before and after the bucket was trained (count 0 when none).
  eval::metrics eval_before, eval_after;
};

/// One bucket's held-out evaluation (eval_fraction > 0, at least one edge held out).
struct bucket_eval_report {
  std::int64_t epoch = 0, edge_path = 0, edge_chunk = 0, iteration = 0;
  std::int32_t lhs = 0, rhs = 0; // the bucket
  std::int64_t edges = 0;        // edges of the bucket's chunk
  std::int64_t trained = 0;      // edges given to the kernel (edges - held out)
  /// Indices of the held-out edges in the bucket's chunk, ascending; valid
  /// during the callback only.
  std::span<const std::int64_t> held_out;
  eval::metrics before, after;
  double eval_seconds = 0; // both evaluations
};

/// A bucket released in an iteration, as the coordinator heard of it.
struct bucket_report {
  std::int64_t iteration = 0, iterations = 0; // 0-based, of
  std::int32_t lhs = 0, rhs = 0;
  std::uint32_t trainer = 0;
  std::int64_t edges = 0;
  double seconds = 0; // its kernel's
  double loss = 0;    // summed over its edges
  std::int64_t done = 0, total = 0; // the iteration's buckets released so far, of
  std::int64_t iteration_edges = 0;  // in those
  double iteration_seconds = 0;      // since the iteration began
};

struct train_callbacks {
  std::function<void(std::string_view)> log;
  std::function<void(const iteration_report&)> iteration_done;
  /// Each bucket released (progress within an iteration).
  std::function<void(const bucket_report&)> bucket_done;
  /// After a bucket with held-out edges was trained and evaluated again.
  /// Called from the trainers' threads, one call at a time.
  std::function<void(const bucket_eval_report&)> bucket_evaluated;
};

struct train_summary {
  std::uint64_t seed = 0;
  std::int64_t iterations_run = 0;
  std::int64_t first_iteration = 0; // > 0 when resumed
  std::int64_t edges = 0;
  double seconds = 0;
  std::int64_t checkpoint_version = 0;
  bool stopped = false; // by options.stop
  /// By `abg console --admin`'s stop: the buckets being trained finished and
  /// a checkpoint was committed mid-iteration; run again to resume.
  bool stopped_by_console = false;
  /// early_stopping: the epoch (0-based) whose held-out loss rose above the
  /// previous epoch's, after which training stopped (also when a resumed run
  /// finds this in training_stats.json and trains nothing).
  std::optional<std::int64_t> early_stopped_epoch;
  /// Times the cluster rolled back to the last commit (a partition or
  /// parameter server lost and back).
  std::uint32_t rollbacks = 0;
  /// Buckets trained by each trainer (by trainer id) over the run.
  std::vector<std::uint32_t> buckets_per_trainer;
};

/// One process: the nodes of PBG's layout for the config's num_machines and
/// num_partition_servers in one actor system (num_machines = 1: a single node).
expected<train_summary> run_simulation(const config& cfg, std::string_view config_toml, const train_options& options,
                                       const train_callbacks& callbacks = {});

struct node_options {
  cluster_spec cluster;
  std::size_t index = 0; // this node, in cluster.nodes
  /// Where this node listens: its cluster-file address; for PBG's ranks > 0
  /// (no address in the layout) the address it advertises, port 0 = any.
  std::string host;
  std::uint16_t port = 0;
  /// The coordinator's node, for nodes that do not host it.
  std::string coordinator_host;
  std::uint16_t coordinator_port = 0;
  /// PBG's `file://` rendezvous: the coordinator's node writes "host:port"
  /// there once it listens; the others read it (instead of coordinator_host).
  std::string rendezvous_file;
  /// A node without the coordinator whose data differs from the coordinator
  /// node's (or is missing) fetches the files that differ at join; false:
  /// it is refused instead, naming the first such file.
  bool fetch_data = true;
  /// The pre-flight check (`abg cluster check`, `abg node --check`): join
  /// as usual (version, config and data compared, nothing fetched), then the
  /// coordinator checks each node's memory and that the nodes reach each
  /// other, prints one line per node and check, and every node exits 0 when
  /// all passed, 1 naming what failed. Nothing is trained.
  bool check_only = false;
  /// The cluster's token (docs/security.md): every port this node opens and
  /// every connection it makes proves it first. Required.
  cluster_token token;
  train_options train;
};

/// How a node's run ended.
struct node_result {
  int exit_code = 0;
  std::string message;                  // why, when exit_code != 0
  bool stopped = false;                 // by options.train.stop
  std::optional<train_summary> summary; // the coordinator's node: what was trained
};

/// One node of a cluster in this process: its roles, joined to the others
/// through CAF's middleman; returns when the coordinator says the run is
/// over for it, or when it loses the coordinator.
node_result run_node(const config& cfg, std::string_view config_toml, const node_options& options,
                     const train_callbacks& callbacks = {});

} // namespace abg::node
