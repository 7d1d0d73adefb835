// A discrete-event model of one training epoch on a cluster in PBG's layout
// (docs/scaling.md): every machine a trainer, a partition server (partition
// k on machine k mod M) and a parameter-server shard. The real lock-server
// scheduler (runtime/schedule/bucket_scheduler) hands out the buckets, in
// modelled time: a trainer writes back what its grant drops, unlocks it,
// fetches what it lacks, runs the kernel for the bucket's edges at the
// measured rate and releases it, as actors/trainer.cpp does. Partitions
// cross machines over one link per machine (its send and its receive side
// each carry one transfer at a time, at the bandwidth, after the latency);
// a fetch from the trainer's own machine costs nothing. With a partition
// buffer (buffer_capacity > 0) the partition servers keep partitions on
// disk: a fetch first reads the partition from its server's disk and a
// write-back ends writing it there (one disk per machine, one transfer at a
// time, at the disk bandwidth). As in the trainer, a grant's write-back runs
// beside the kernel without a buffer or when all the bucket fetches was read
// ahead, and a grant's read-ahead (grant::ahead) runs beside the kernel
// after it. The bucket is released when its kernel is done; its I/O may
// run on beside the next buckets' kernels, and the next bucket that fetches
// a partition waits for it to end. Parameter sharing sends each trainer's shared parameters to the
// shards and back once per bucket, beside the kernel. The epoch ends with a
// checkpoint commit, which links the files of partitions kept on disk by
// servers that write the checkpoint themselves.
// Plain C++: no actors, no tensors.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "runtime/schedule/bucket_scheduler.h"

namespace abg::simulate {

/// What the epoch trains.
struct graph_model {
  /// The bucket grid, its order and seed (num_trainers: the cluster's machines).
  schedule::scheduler_config schedule;
  std::vector<std::uint64_t> bucket_edges; // indexed lhs * nparts_rhs + rhs
  /// Bytes of one lockable partition (embeddings and Adagrad state of every
  /// partitioned type of that side): [side][part]; side 1 unused when shared.
  std::vector<std::uint64_t> partition_bytes[2];
  std::uint64_t shared_bytes = 0; // operators and unpartitioned tables, every trainer's copy
  /// Rows of each entity type's largest partition, and the relation ids:
  /// what a short run of the kernel trains on (`abg simulate`'s speed).
  std::map<std::string, std::int64_t> partition_rows;
  std::int64_t relation_ids = 0;
};

/// The machines and what they can do.
struct cluster_model {
  std::int32_t machines = 1;
  double edges_per_second = 1e6; // one trainer's kernel
  double bandwidth = 1.25e9;     // bytes/s, each way, per machine
  double latency = 100e-6;       // s per transfer and per control round trip
  double disk_bandwidth = 1e9;   // bytes/s, checkpoint writes and a buffer's partition store
  bool local_checkpoints = false; // checkpoint_mode = "local": servers write their own partitions
  /// 0: every machine has its own cores. N: all machines are processes on
  /// one host of N cores (a cluster on loopback): a kernel that starts while
  /// k kernels run (itself included) runs at edges_per_second * min(1, N / k).
  std::int32_t host_cores = 0;
};

struct machine_figures {
  double kernel_seconds = 0;   // training
  double idle_fraction = 0;    // of the epoch, not in a kernel
  std::uint64_t bytes_sent = 0, bytes_received = 0;
  std::uint64_t memory_bytes = 0; // its server's partitions (none with a buffer: on disk), the most its trainer held at once, shared parameters
  std::int32_t buckets = 0;
  std::int32_t loads = 0; // partitions fetched
  std::int32_t read_ahead = 0; // of those, read ahead while the bucket before trained
  double waited_seconds = 0;   // the trainer waited for partition I/O: fetches, write-backs, the I/O still running before a fetch or at its own unlock
};

struct epoch_figures {
  double seconds = 0;          // the whole epoch, the commit included
  double training_seconds = 0; // to the last write-back
  double commit_seconds = 0;
  std::uint64_t swap_bytes = 0; // partitions fetched and written back, across machines or not
  std::vector<machine_figures> machines;
  /// (trainer, bucket) in the order granted.
  std::vector<std::pair<std::uint32_t, schedule::bucket>> sequence;
};

/// One request the simulated trainers made of the lock server, in the order
/// it took them, with what it answered: replayed against the real lock
/// server actor, the same requests must get the same answers
/// (tests/actors/lock_replay_test.cpp).
struct lock_call {
  enum class kind : std::uint8_t { acquire, unlock, release, handed };
  kind what = kind::acquire;
  std::uint32_t trainer = 0;
  std::vector<schedule::part_version> written; // unlock
  schedule::bucket trained{};                  // release
  /// The grants (not `wait`) this request led to, as (trainer, grant): an
  /// acquire's own, and those of parked trainers served after an unlock or
  /// a release.
  std::vector<std::pair<std::uint32_t, schedule::grant>> grants;
  std::vector<schedule::part_version> handed; // handed: the answer
};

/// Simulates epoch `epoch` (0 applies PBG's first-epoch rule); with `calls`,
/// also records every request made of the lock server. Throws
/// std::invalid_argument for an inconsistent model.
epoch_figures simulate_epoch(const graph_model& graph, const cluster_model& cluster, std::int32_t epoch = 1,
                             std::vector<lock_call>* calls = nullptr);

} // namespace abg::simulate
