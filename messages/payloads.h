// The plain payload types of the messages between roles (no actor handles:
// those are in messages/messages.h beside the interfaces that need them).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "abg/eval/metrics.h"
#include "abg/storage/dataset_files.h"
#include "messages/tensor_codec.h"
#include "runtime/schedule/bucket_scheduler.h"

namespace abg::msg {

using schedule::bucket;
using schedule::grant;
using schedule::part_key;
using schedule::part_version;
using storage::dataset_file;

/// What a trainer reports when it releases a bucket.
struct bucket_stats {
  uint32_t trainer = 0;
  int32_t epoch = 0;
  bucket trained{};
  int64_t edges = 0;   // trained (the chunk's edges minus the held-out ones)
  int64_t chunk_edges = 0;  // the bucket's edges in this chunk
  double loss = 0;     // sum over the trained edges
  double seconds = 0;  // kernel wall time
  double fetch_seconds = 0;  // the kernel waiting for partitions: the swaps before it, the I/O of buckets before still running
  // eval_fraction: the bucket's held-out edges ranked before and after
  // training it (empty when nothing was held out).
  eval::metrics eval_before, eval_after;
  double lock_wait_seconds = 0;  // asking the lock server for the bucket (waits for a free one included)
  uint32_t fetched = 0;          // partitions fetched for it: its swaps
  uint32_t read_ahead = 0;       // of those, the ones read ahead beside the bucket before
};

/// A partition of one entity type.
struct partition_key {
  std::string entity;
  int32_t part = 0;
  auto operator<=>(const partition_key&) const = default;
};

std::string to_string(const partition_key& k);

/// A put that replaces whatever the partition server holds (seeding).
inline constexpr uint64_t any_version = ~uint64_t{0};

/// Rows [row_offset, row_offset + rows) of a partition: embeddings [rows, dim]
/// and their row-wise Adagrad state [rows]. A partition travels as explicitly
/// requested chunks, several in flight (flow control by request/response).
/// `version`: the partition's version (get: the stored one; put: the new one).
/// `base_version` (put only): the version the writer started from; the
/// partition server refuses the put if it holds another (a writer that was
/// declared lost and replaced), unless it is any_version.
struct partition_chunk {
  partition_key key;
  uint64_t version = 0;
  uint64_t base_version = any_version;
  uint64_t row_offset = 0;
  uint64_t total_rows = 0;
  tensor embeddings;
  tensor optim_state;
};

/// The shape of `rows` rows of optimizer state of `width` values each:
/// [rows] for row-wise Adagrad (width 1), [rows, width] for element-wise.
inline std::vector<int64_t> state_shape(uint64_t rows, int64_t width) {
  if (width == 1) return {static_cast<int64_t>(rows)};
  return {static_cast<int64_t>(rows), width};
}
/// Values per row of an optimizer state shaped by state_shape.
inline int64_t state_width_of(const tensor& state) { return state.shape.size() == 2 ? state.shape[1] : 1; }
/// Rows [first, first + n) of the optimizer state at `base`, `width` values
/// a row, kept alive by `owner` (no copy).
inline tensor state_rows(std::shared_ptr<const void> owner, const float* base, uint64_t first, uint64_t n,
                         int64_t width) {
  const auto w = static_cast<uint64_t>(width);
  return tensor::view(state_shape(n, width), std::move(owner), base + first * w, n * w);
}

/// A stored partition as a partition server lists it.
struct partition_info {
  partition_key key;
  uint64_t version = 0;
  uint64_t rows = 0;
  int64_t dim = 0;
  int64_t state_width = 1; // optimizer state values per row (1 or dim)
};

/// checkpoint_mode = "local": a table file a partition server wrote into
/// its own node's checkpoint path ("tables/NAME", payload bytes and checksum
/// as a checkpoint manifest lists them).
struct table_file {
  std::string name;
  uint64_t bytes = 0;
  uint64_t checksum = 0;
  bool linked = false; // a hard link of the partition store's file, not a copy
};

/// A float tensor with a name (shared parameters, their optimizer state,
/// unpartitioned tables held by a trainer).
struct named_tensor {
  std::string name;
  tensor value;
};

/// Status of a trainer (answered while its kernel runs).
struct trainer_status {
  uint32_t trainer = 0;
  bool busy = false;
  bucket current{};
  uint32_t buckets_trained = 0;
  // The tables it holds (partitions at the version it fetched; its
  // unpartitioned tables at version 0) and the bytes of its shared parameters.
  std::vector<partition_info> held;
  uint64_t parameter_bytes = 0;
  double busy_seconds = 0;  // how long `current` has been in hand (fetching, training), when busy
};

/// A parameter-server shard's counters, from its start.
struct param_status {
  uint64_t names = 0, bytes = 0;  // the parameters it holds
  uint64_t pushes = 0, pulls = 0;
  uint64_t pushed_bytes = 0, pulled_bytes = 0;  // deltas in; sums and pulls out
  double seconds = 0;                            // since it started
};

/// CAF messages between an actor of a node with `role` and actor `remote`
/// of the process at `peer` (actors/role_traffic.h: how each is counted once).
struct role_flow {
  std::string peer;
  bool outgoing = false;
  std::string role;
  uint64_t remote = 0;
  uint64_t messages = 0, bytes = 0;
};

/// One of a node's long-lived role actors, by its CAF actor id.
struct actor_role {
  uint64_t actor = 0;
  std::string role;
};

/// What a node reports of itself: the coordinator asks every heartbeat
/// interval (its answer is the node's heartbeat in the console's `nodes`).
struct node_status {
  uint64_t rss_bytes = 0;
  // This process's traffic with other processes by purpose (swaps,
  // checkpoints, parameters, control), from its start (actors/traffic.h).
  std::vector<uint64_t> sent, received;
  uint64_t implied_swaps = 0;
  // The same bytes by the other end of each TCP connection ("ip:port").
  std::vector<std::string> peers;
  std::vector<uint64_t> peer_sent, peer_received;
  // Messages by purpose, as `sent` and `received`, and by peer, as `peer_sent` and `peer_received`.
  std::vector<uint64_t> messages_sent, messages_received;
  std::vector<uint64_t> peer_messages_sent, peer_messages_received;
  // CAF's messages by the roles at both ends: the node's flows, its role
  // actors (whose ids name the other end of other nodes' flows), and its
  // connections' own ends (how an accepted connection's peer is found).
  std::vector<role_flow> flows;
  std::vector<actor_role> actors;
  std::vector<std::string> local_ends;
};

/// One line of a node's log, forwarded to the coordinator for the run's log
/// (actors/run_log.h): the node's name, when it was logged (microseconds
/// since the Unix epoch, the node's clock), the text.
struct log_line {
  std::string node;
  int64_t micros = 0;
  std::string text;
};

/// What a run did (the coordinator's answer to `run`).
struct run_summary {
  uint64_t seed = 0;
  int64_t iterations_run = 0;
  int64_t first_iteration = 0;  // > 0 when resumed
  int64_t edges = 0;
  double seconds = 0;
  int64_t checkpoint_version = 0;
  bool stopped = false;               // by a signal on the coordinator's node
  uint8_t stopped_by_console = 0;     // by `abg console --admin`'s stop (not a bool: see member)
  int64_t early_stopped_epoch = -1;  // -1: none
  uint32_t rollbacks = 0;           // partition or parameter servers lost and replaced
  std::vector<uint32_t> buckets_per_trainer;  // buckets trained by each trainer id, whole run
};

/// The coordinator's node's copy of the imported data (storage::list_dataset_files),
/// with what a node must share with it to use the data.
struct data_listing {
  std::string dataset;       // the entity path's dataset id (hex)
  std::string config_digest; // of the coordinator's effective training config
  std::string abg_version;
  std::vector<dataset_file> files;
};

/// Bytes of a data file per read.
inline constexpr uint64_t data_chunk_bytes = 8u << 20;

}  // namespace abg::msg
