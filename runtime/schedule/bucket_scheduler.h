// The lock server's brain: which bucket a trainer trains next, which
// partitions it holds, and the version of every partition last written back.
// Plain C++, no actors, no torch, so it is tested exhaustively on its own
// (docs/actors.md, "Scheduler rules").
#pragma once

#include <compare>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/schedule/position_set.h"

namespace abg::schedule {

/// Bucket (lhs partition, rhs partition).
struct bucket {
  int32_t lhs = 0;
  int32_t rhs = 0;
  auto operator<=>(const bucket&) const = default;
};

std::string to_string(const bucket& b);

/// A lockable partition as the scheduler sees it: side 0 (lhs) or 1 (rhs)
/// and the partition index; with shared partitions (one entity type on both
/// sides) side is always 0. Every partitioned entity type of that side has
/// its partition `part` under this one lock and version.
struct part_key {
  int32_t side = 0;
  int32_t part = 0;
  auto operator<=>(const part_key&) const = default;
};

/// PBG's orders, and `buffer`: the order for a partition buffer
/// (make_buffer_order in buffer_loads.h), which needs the buffer's capacity.
enum class bucket_order : uint8_t { random, affinity, inside_out, outside_in, buffer };

/// Parses PBG's names ("random", "affinity", "inside_out", "outside_in") and "buffer".
std::optional<bucket_order> parse_bucket_order(std::string_view name);
std::string_view to_string(bucket_order order);

/// The order buckets are handed out in one epoch (PBG's create_ordered_buckets).
/// `seed` already mixes in the epoch; random and affinity depend on it, the
/// layered orders do not. Throws std::invalid_argument for `buffer` (it
/// needs a capacity: make_buffer_order).
std::vector<bucket> make_bucket_order(int32_t nparts_lhs, int32_t nparts_rhs, bucket_order order, uint64_t seed);

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
  /// Partitions a trainer holds at most (buffer_capacity; 0: those of its
  /// current bucket only). With one trainer it keeps, besides its bucket's,
  /// the held partitions the pending buckets need soonest; with several it
  /// keeps only its bucket's, since a partition it holds idle is one the
  /// others cannot have. With one trainer and room for a bucket and one
  /// more (K >= 3), one of the K is the read-ahead slot (grant::ahead): the order and
  /// the partitions kept plan for K - 1. With several trainers and room for
  /// two buckets, each grant also reserves the trainer's next bucket (its
  /// partitions locked for it, so what it reads ahead cannot change under
  /// it). Needed by order `buffer`.
  int32_t buffer_capacity = 0;
};

using trainer_id = uint32_t;

/// A partition and the version a trainer wrote back (unlock), or the least
/// version the partition server must hand out (grant.fetch).
struct part_version {
  part_key key;
  uint64_t version = 0;
  friend bool operator==(const part_version&, const part_version&) = default;
};

/// The answer to acquire.
struct grant {
  enum class kind : uint8_t {
    /// Train `assigned` of `epoch`: first write back and unlock `drop`, then
    /// fetch `fetch` (at least the versions given), keep the rest held.
    bucket,
    /// Nothing is allowed for this trainer now: write back and unlock `drop`
    /// (everything it holds), then ask again.
    drop,
    /// Nothing allowed, and nothing held or all of it still needed (the
    /// trainer's own write-back still running, a reservation's handovers):
    /// ask again later (the lock server parks the request).
    wait,
  };
  kind what = kind::wait;
  int32_t epoch = 0;
  bucket assigned{};
  std::vector<part_key> drop;
  std::vector<part_version> fetch;
  /// A bucket with a buffer that reads ahead: partitions the trainer's next
  /// bucket needs, as the order stands, that it will not hold. It may read
  /// them (at least these versions) while it trains `assigned`, once `drop`
  /// is written back: the read-ahead slot. With one trainer only a hint: the
  /// next grant's `fetch` says what to load, and at what version. With
  /// several, the next bucket is reserved and these partitions locked for the
  /// trainer: its next grant is that bucket and fetches them at these versions.
  std::vector<part_version> ahead;
  /// Several trainers, a reserved next bucket that needs partitions other
  /// trainers hold: the lock server hands each to this trainer when its
  /// holder writes it back (nobody else gets it then), and says so when
  /// asked (bucket_scheduler::take_handed); the trainer may read it ahead
  /// from then on. The next grant is the reserved bucket only if all were
  /// handed over by then; else the reservation goes back and the trainer
  /// gets the best bucket allowed, as without one.
  std::vector<part_key> awaited;
};

/// Rules (REFERENCE.md, "Training loop" and "Distributed roles"; ARCHITECTURE.md):
/// - a partition is held (locked) by at most one trainer; a trainer keeps the
///   partitions of its last bucket locked after releasing the bucket and
///   unlocks them only once it has written them back (so nobody fetches a
///   stale copy); a side with a single, unshared partition is unpartitioned
///   and never locked;
/// - among allowed buckets (pending, every partition free or held by the
///   asking trainer, first-epoch rule): with one trainer the first in bucket
///   order; with several the least swap cost (partitions the trainer does not
///   hold), ties by bucket order;
/// - a trainer writes back the partitions it holds that its next bucket does
///   not need; with a buffer and one trainer it keeps, as many as fit beside
///   the bucket's, those the pending buckets need soonest (Belady's rule over
///   the order);
/// - with several trainers and a buffer with room for two buckets, a grant
///   also reserves the trainer's next bucket (least swap cost given what it
///   will hold): nobody else gets it, its partitions are locked for the
///   trainer (those it holds and the next bucket needs are kept), and its
///   next acquire gets it; paused, the reservation goes back; when no
///   bucket is allowed, the reservation may await partitions other trainers
///   hold (not those they keep or locked for their own reservations, each
///   awaited by one reservation at most): each is locked for it when
///   written back, and the next acquire gets the bucket only if every one
///   was, else the reservation goes back (awaiting never blocks anybody);
/// - first epoch: only buckets with an initialised side (partition 0 of each
///   side counts from the start; a partition is initialised when a bucket
///   containing it is released);
/// - what a grant drops is being written back until its unlock: still
///   locked, no longer the trainer's to train, so its next acquire may come
///   first (the write-back runs across the kernels after it). A bucket that
///   needs such a partition waits for its unlock: with one trainer the order
///   waits (a grant of `wait`), with several another bucket may go. A
///   trainer with a write-back running is told to wait rather than to drop
///   what it holds;
/// - every partition has a version: the one last written back (unlock); a
///   grant names, per partition to fetch, the version the partition server
///   must have at least, so no trainer ever trains on a stale copy;
/// - a trainer that dies: its locks are freed (what it held rolls back to the
///   partition servers' last copies), its current bucket and every bucket it
///   released whose updates it had not yet written back are pending again;
/// - the epoch is done when every bucket is released and every partition
///   written back (no locks).
class bucket_scheduler {
public:
  /// Throws std::invalid_argument on a bad config.
  explicit bucket_scheduler(scheduler_config config);

  /// Starts an epoch: every bucket pending but those of `done` (trained
  /// before a commit made mid-epoch, as if released and written back).
  /// Throws std::logic_error while a partition is still held or a bucket
  /// active, std::invalid_argument for a bucket of `done` off the grid.
  void start_epoch(int32_t epoch_index, const std::vector<bucket>& done = {});

  /// Paused (an admin console's pause, or a commit mid-epoch): no bucket is
  /// handed out; a trainer that asks is told to write back and unlock what
  /// it holds, then to wait. Kept across reset.
  void set_paused(bool paused) { paused_ = paused; }
  bool paused() const { return paused_; }
  /// No bucket is being trained and no partition is held: every update is
  /// on the partition servers.
  bool drained() const { return active_.empty() && locked_ == 0; }

  /// Forgets every lock, active bucket and unsaved update (a rollback: the
  /// partition servers were seeded again, every partition at `version`); the
  /// next epoch must be started again.
  void reset(uint64_t version);

  /// The next step for `trainer`. A trainer that already trains a bucket
  /// gets that one again (idempotent retry, nothing to drop or fetch).
  grant acquire(trainer_id trainer);

  /// Marks the bucket trained; its partitions stay held by the trainer. False
  /// (and no change) if `trainer` does not train it.
  bool release(trainer_id trainer, bucket b);

  /// The trainer wrote these partitions back; unlocks them and records the
  /// versions (the recorded one again: unchanged, not written). False (and no
  /// change at all) if one is not held by `trainer` or its version is older
  /// than the recorded one.
  bool unlock(trainer_id trainer, const std::vector<part_version>& written);

  /// Frees the trainer's locks; re-queues its current bucket and the buckets
  /// whose updates it had not written back yet (returned, current first).
  std::vector<bucket> trainer_died(trainer_id trainer);

  // --- queries (tests, inspector) ---
  bool epoch_done() const { return started_ && released_ == order_.size() && locked_ == 0; }
  bool epoch_started() const { return started_; }
  int32_t epoch() const { return epoch_; }
  const std::vector<bucket>& order() const { return order_; }
  std::size_t num_buckets() const { return order_.size(); }
  std::size_t num_released() const { return released_; }
  std::optional<bucket> active(trainer_id trainer) const;
  /// What the trainer holds to train: locked by it and not being written back.
  std::set<part_key> held(trainer_id trainer) const;
  /// Dropped by a grant, not yet unlocked: being written back.
  bool writing(part_key k) const { return writing_[k.side][static_cast<std::size_t>(k.part)] != 0; }
  /// A parked trainer whose `wait` says nothing of the others': it has a
  /// reservation or holds partitions (it waited for its own write-back, or
  /// for handovers). The others parked hold nothing, so they all see the
  /// same grid. The lock server asks each of these on its own.
  bool waits_alone(trainer_id trainer) const { return reserved(trainer) || holdings_.contains(trainer); }
  /// The trainer has partitions being written back.
  bool writes_back(trainer_id trainer) const { return writes_back_.contains(trainer); }
  /// Pending, no partition held by a trainer other than `trainer`, first-epoch rule met.
  bool allowed(bucket b, trainer_id trainer) const;
  bool is_initialised(int32_t side, int32_t part) const;
  /// The lockable partitions of a bucket (none for an unpartitioned side).
  std::vector<part_key> partitions_of(bucket b) const;
  /// The last version written back (the seeded version until then).
  uint64_t version(part_key k) const;
  const scheduler_config& config() const { return config_; }
  /// The partitions a grant may name in `ahead`: with one trainer 1 (a buffer
  /// with room for a bucket's partitions and one more, and at least 3); with
  /// several, a bucket's partitions (a buffer with room for two buckets'), the
  /// reserved next bucket's; else 0.
  int32_t read_ahead_slots() const;
  /// The partitions the order and the buffer's retention plan for: the
  /// capacity less one trainer's read-ahead slot (several trainers keep only
  /// their bucket's partitions and their reservation's).
  int32_t planned_capacity() const {
    return config_.buffer_capacity - (config_.num_trainers == 1 ? read_ahead_slots() : 0);
  }
  /// The bucket reserved as the trainer's next one (several trainers, a buffer).
  std::optional<bucket> reserved(trainer_id trainer) const;
  /// The partitions awaited by the trainer's reservation (grant::awaited)
  /// handed over to it since it last asked, at their versions: locked for
  /// it now, to read ahead.
  std::vector<part_version> take_handed(trainer_id trainer);

private:
  enum class state : uint8_t { pending, active, done };
  struct unsaved {
    bucket trained;
    std::set<part_key> pending; // its partitions not yet written back
  };
  struct reservation {
    bucket next;
    std::vector<part_key> locked;      // for it only: read ahead, not held by the trainer yet
    std::vector<part_key> awaited;     // held by other trainers, locked for it once written back
    std::vector<part_version> handed;  // awaited ones locked for it since take_handed
  };
  bool reserves() const { return config_.num_trainers > 1 && read_ahead_slots() > 0; }
  // Back to the others: its partitions unlocked, the bucket pending, nothing awaited.
  void cancel_reservation(trainer_id trainer);
  // A partition just unlocked: locked for the reservation awaiting it, if any.
  void hand_over(part_key k);
  // Pending, first-epoch rule met, and each partition free, the trainer's,
  // or held by another trainer that neither keeps it for its reservation
  // nor has it awaited by another one.
  bool awaitable(bucket b, trainer_id trainer) const;
  // The reservation to await when none is allowed: the earliest awaitable
  // bucket sharing a partition with `have`, else among the first pending ones.
  std::optional<std::size_t> least_awaited(trainer_id trainer, const std::set<part_key>& have) const;
  std::size_t index_of(bucket b) const;
  part_key key(int32_t side, int32_t part) const;
  bool locked_side(int32_t side) const;
  int swap_cost(bucket candidate, const std::set<part_key>& have) const;
  void drop_into(trainer_id trainer, grant& g, const std::vector<part_key>& keep) const;
  // The position in order of the first pending bucket that needs `k` (order size when none).
  std::size_t next_use(part_key k) const;
  // The choice of acquire, without scanning the grid: the first allowed
  // bucket in order, or (several trainers) the first of least swap cost.
  std::optional<std::size_t> first_allowed(trainer_id trainer) const;
  std::optional<std::size_t> least_swaps(trainer_id trainer, const std::set<part_key>& have) const;
  // The earliest allowed bucket (position) among (lhs, rhs) for every lhs in `lhs` and rhs in `rhs`.
  std::optional<std::size_t> earliest_allowed(const std::vector<int32_t>& lhs, const std::vector<int32_t>& rhs,
                                              trainer_id trainer) const;
  void set_pending(bucket b, bool pending);
  // The first epoch's rule: only buckets with an initialised side.
  bool init_rule() const { return config_.tree_init_order && epoch_ == config_.first_epoch; }
  void initialise(part_key k); // and make its pending buckets eligible

  scheduler_config config_;
  int32_t epoch_ = -1;
  bool started_ = false;
  bool paused_ = false;
  std::vector<bucket> order_;
  std::vector<state> state_; // indexed by lhs * nparts_rhs + rhs
  std::vector<uint32_t> position_; // of each bucket in order_, indexed as state_
  position_set pending_;           // positions in order_ of the pending buckets
  position_set eligible_;          // init_rule(): those of them with an initialised side
  std::size_t released_ = 0;
  std::map<trainer_id, bucket> active_;
  // Who holds each partition ([side][part], no_trainer when free) and what
  // each trainer holds: asked for every candidate bucket, so no map walk.
  static constexpr trainer_id no_trainer = UINT32_MAX;
  std::vector<trainer_id> owner_[2];
  std::map<trainer_id, std::set<part_key>> holdings_; // writing ones included
  std::vector<uint8_t> writing_[2];                    // [side][part]: being written back
  std::map<trainer_id, std::size_t> writes_back_;      // how many, per trainer with any
  // Those a grant drops: being written back until unlocked.
  void start_writing(trainer_id t, const std::vector<part_key>& drop);
  // acquire's grant, before what it drops is marked as being written back.
  grant choose(trainer_id trainer);
  std::size_t locked_ = 0;
  std::size_t locked_on_[2] = {0, 0}; // per side
  trainer_id owner(part_key k) const { return owner_[k.side][static_cast<std::size_t>(k.part)]; }
  void lock(part_key k, trainer_id t);
  void free_lock(part_key k);
  std::map<trainer_id, std::vector<unsaved>> unsaved_;
  std::map<trainer_id, reservation> reserved_;
  std::map<part_key, trainer_id> awaited_by_;  // the reservation awaiting each partition
  std::set<part_key> initialised_;
  std::map<part_key, uint64_t> versions_;
  uint64_t base_version_ = 1;
};

} // namespace abg::schedule
