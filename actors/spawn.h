// Spawning the roles (docs/actors.md). Each role is a typed actor of
// messages/interfaces.h that owns its state; what they need from the node
// that hosts them (its plan of the run, where its logs go) is given here.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "abg/cluster.h"

#include <caf/all.hpp>

#include "abg/node/run.h"
#include "actors/deadlines.h"
#include "actors/local_tables.h"
#include "actors/partition_shapes.h"
#include "messages/interfaces.h"
#include "runtime/schedule/bucket_scheduler.h"
#include "runtime/train/plan.h"

namespace abg::actors {

/// How a node observes its own roles (never shared state between roles).
using log_fn = std::function<void(const std::string&)>;

msg::lock_server_actor spawn_lock_server(caf::actor_system& sys, schedule::scheduler_config config,
                                         deadlines limits);
/// `label` names the server in its error messages (and avoids CAF 0.17's
/// zero-argument spawn path, which UBSan flags inside CAF's headers);
/// `store`: where it writes its tables with checkpoint_mode = "local".
/// `shapes`: every partition's entity count and dimension, which puts must
/// match (null: any, for servers outside a run).
msg::partition_server_actor spawn_partition_server(caf::actor_system& sys, std::string label, table_store store = {},
                                                  std::shared_ptr<const partition_shapes> shapes = nullptr);
msg::parameter_server_actor spawn_parameter_server(caf::actor_system& sys, std::string label);

struct trainer_hooks {
  log_fn log;
  /// After a bucket with held-out edges was trained and evaluated again; on the trainer's worker thread.
  std::function<void(const node::bucket_eval_report&)> bucket_evaluated;
};

/// A trainer of the run `p` (which must outlive it): idle until set up by
/// the coordinator, then acquires, trains and releases buckets until it is
/// stopped. Its jobs (swapping partitions, the kernel, parameter exchanges)
/// run on its own worker thread, never on CAF's scheduler.
msg::trainer_actor spawn_trainer(caf::actor_system& sys, const train::plan& p, trainer_hooks hooks, deadlines limits);

/// The coordinator's node's copy of the data of `cfg` (which must outlive
/// it), listed and checksummed on the first request, served by file index
/// and offset; `listing` gives the dataset id, config digest and abg version.
/// Detached: it reads files, never on CAF's scheduler threads.
msg::data_server_actor spawn_data_server(caf::actor_system& sys, const config& cfg, msg::data_listing listing);

struct coordinator_setup {
  const train::plan* plan = nullptr; // must outlive the coordinator
  std::string config_toml;           // the effective config, stored with every checkpoint
  cluster_spec cluster;              // the nodes that must join
  /// What every joining node must have too.
  std::string dataset, config_digest, abg_version;
  msg::data_server_actor data; // this node's copy of the data, for nodes that join without it
  /// The pre-flight check (`--check`): once every node joined, check what a
  /// run needs (peers reachable, memory) and end without training.
  bool check_only = false;
  std::uint64_t seed = 0;          // the run's seed
  std::uint64_t held_out_seed = 0; // the configured seed, else 0
  node::train_callbacks callbacks; // log, iteration_done, bucket_done (on the coordinator's threads)
  deadlines limits;
};

/// The coordinator: waits for the cluster's nodes to join, seeds the
/// servers from the start point, runs the iterations (epoch, edge path, edge
/// chunk) through the lock server, commits a checkpoint after each, and
/// handles lost nodes (re-queued buckets, rollback to the last commit).
msg::coordinator_actor spawn_coordinator(caf::actor_system& sys, coordinator_setup setup);

} // namespace abg::actors
