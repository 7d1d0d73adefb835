// The lock server's brain: which bucket a trainer trains next. Plain C++, no
// actors, no torch, so it is tested exhaustively on its own (docs/actors.md).
#pragma once

#include <compare>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace abg::actors {

/// Bucket (lhs partition, rhs partition).
struct bucket {
  int32_t lhs = 0;
  int32_t rhs = 0;
  auto operator<=>(const bucket&) const = default;
};

std::string to_string(const bucket& b);

enum class bucket_order : uint8_t { random, affinity, inside_out, outside_in };

/// Parses PBG's names ("random", "affinity", "inside_out", "outside_in").
std::optional<bucket_order> parse_bucket_order(std::string_view name);
std::string_view to_string(bucket_order order);

/// The order buckets are handed out in one epoch (PBG's create_ordered_buckets).
/// `seed` already mixes in the epoch; random and affinity depend on it, the
/// layered orders do not.
std::vector<bucket> make_bucket_order(int32_t nparts_lhs, int32_t nparts_rhs, bucket_order order,
                                      uint64_t seed);

struct scheduler_config {
  int32_t nparts_lhs = 1;
  int32_t nparts_rhs = 1;
  bucket_order order = bucket_order::inside_out;
  uint64_t seed = 0;
  /// lhs and rhs are the same entity type: partition k on either side is the
  /// same partition (requires nparts_lhs == nparts_rhs).
  bool shared_partitions = false;
  /// With one trainer the order alone decides; with more, least swap cost.
  int32_t num_trainers = 1;
  /// PBG's distributed_tree_init_order, applied in the epoch `first_epoch`.
  bool tree_init_order = true;
  int32_t first_epoch = 0;
};

using trainer_id = uint32_t;

struct acquire_result {
  enum class kind : uint8_t { bucket, wait, done };
  kind what = kind::done;
  abg::actors::bucket assigned{};  // valid when what == kind::bucket
};

/// Rules (REFERENCE.md, "Training loop" and "Distributed roles"):
/// - a partition is held by at most one trainer (a side with a single,
///   unshared partition is unpartitioned and never locked);
/// - among allowed buckets: with one trainer the first in bucket order; with
///   several the least swap cost against the trainer's previous bucket (how
///   many of the candidate's partitions that bucket does not hold), ties by
///   bucket order;
/// - first epoch: only buckets with an initialised side (partition 0 of each
///   side counts from the start; a partition is initialised when a bucket
///   containing it is released);
/// - `wait` only when no allowed bucket exists but some are not yet released;
///   `done` when every bucket of the epoch has been released.
class bucket_scheduler {
public:
  /// Throws std::invalid_argument on a bad config.
  explicit bucket_scheduler(scheduler_config config);

  /// Starts an epoch: every bucket pending, no locks held. Throws
  /// std::logic_error if a bucket of the previous epoch is still held.
  void start_epoch(int32_t epoch_index);

  /// Hands a bucket to `trainer`. A trainer that already holds one gets that
  /// one again (idempotent retry).
  acquire_result acquire(trainer_id trainer, std::optional<bucket> previous);

  /// Marks the bucket trained. False (and no change) if `trainer` does not hold it.
  bool release(trainer_id trainer, bucket b);

  /// Frees the trainer's locks and re-queues its bucket (returned, if any).
  std::optional<bucket> trainer_died(trainer_id trainer);

  // --- queries (tests, inspector) ---
  bool epoch_done() const { return released_ == order_.size(); }
  bool epoch_started() const { return started_; }
  int32_t epoch() const { return epoch_; }
  const std::vector<bucket>& order() const { return order_; }
  std::size_t num_buckets() const { return order_.size(); }
  std::size_t num_released() const { return released_; }
  std::optional<bucket> held_by(trainer_id trainer) const;
  /// Pending, no partition locked by another trainer, first-epoch rule met.
  bool allowed(bucket b) const;
  bool is_initialised(int32_t side, int32_t part) const;
  /// Partition keys of a bucket (side 0 = lhs, 1 = rhs; shared: side 0 only).
  std::vector<std::pair<int32_t, int32_t>> partitions_of(bucket b) const;
  const scheduler_config& config() const { return config_; }

private:
  enum class state : uint8_t { pending, active, done };
  std::size_t index_of(bucket b) const;
  std::pair<int32_t, int32_t> key(int32_t side, int32_t part) const;
  bool locked_side(int32_t side) const;
  int swap_cost(bucket candidate, const std::optional<bucket>& previous) const;

  scheduler_config config_;
  int32_t epoch_ = -1;
  bool started_ = false;
  std::vector<bucket> order_;
  std::vector<state> state_;  // indexed by lhs * nparts_rhs + rhs
  std::size_t released_ = 0;
  std::map<trainer_id, bucket> active_;
  std::map<std::pair<int32_t, int32_t>, trainer_id> locks_;
  std::set<std::pair<int32_t, int32_t>> initialised_;
};

}  // namespace abg::actors
