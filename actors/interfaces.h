// Typed interfaces of the roles (docs/actors.md). Every payload is registered
// in messages/messages.h, so each interface works across machines unchanged.
#pragma once

#include <cstdint>
#include <functional>
#include <stop_token>
#include <string>
#include <vector>

#include <caf/all.hpp>

#include "actors/bucket_scheduler.h"
#include "messages/messages.h"

namespace abg::actors {

using msg::bucket_stats;
using msg::epoch_stats;
using msg::partition_chunk;
using msg::partition_key;
using msg::tensor;
using msg::trainer_status;

/// Lock server: one per cluster.
using lock_server_actor = caf::typed_actor<
    // Starts an epoch (coordinator). False if buckets of the last one are still held.
    caf::replies_to<msg::start_atom, int32_t>::with<bool>,
    // (trainer id, previous bucket, has previous) -> bucket | done. A trainer
    // for which no bucket is allowed yet is answered later, never told "wait".
    caf::replies_to<msg::acquire_atom, uint32_t, bucket, bool>::with<acquire_result>,
    // Marks stats.trained done. False if that trainer does not hold it.
    caf::replies_to<msg::release_atom, bucket_stats>::with<bool>,
    // Answered when every bucket of the current epoch has been released.
    caf::replies_to<msg::epoch_done_atom>::with<epoch_stats>>;

/// Partition server: partitions not in use, with their optimizer state.
using partition_server_actor = caf::typed_actor<
    // (key, first row, max rows) -> that chunk; an error for an unknown key.
    caf::replies_to<msg::get_atom, partition_key, uint64_t, uint64_t>::with<partition_chunk>,
    // Chunks must arrive in row order; the partition is replaced only when its
    // last chunk arrives (true), so a writer that dies midway changes nothing.
    caf::replies_to<msg::put_atom, partition_chunk>::with<bool>,
    // Number of stored partitions.
    caf::replies_to<msg::status_atom>::with<uint64_t>>;

/// Parameter server shard: shared parameters by name.
using parameter_server_actor = caf::typed_actor<
    // Adds the delta (the first push of a name sets it) and returns the sum.
    caf::replies_to<msg::push_atom, std::string, tensor>::with<tensor>,
    caf::replies_to<msg::pull_atom, std::string>::with<tensor>>;

/// What a trainer's kernel gets.
struct kernel_job {
  uint32_t trainer = 0;
  int32_t epoch = 0;
  bucket assigned{};
};

/// The bucket kernel as the trainer sees it. Runs on the trainer's worker
/// thread, never on a CAF scheduler thread; must return soon after `stop` is
/// requested (its result is then discarded). Throwing stops the trainer.
using kernel_fn = std::function<bucket_stats(const kernel_job&, std::stop_token stop)>;

/// Trainer: one per machine.
using trainer_actor = caf::typed_actor<
    // Trains buckets of `epoch` until the lock server says done; replies with
    // how many buckets this trainer trained.
    caf::replies_to<msg::run_atom, int32_t>::with<uint32_t>,
    // Answered at once, also while the kernel runs.
    caf::replies_to<msg::status_atom>::with<trainer_status>,
    // From the worker thread: (job token, ok, stats).
    caf::reacts_to<msg::kernel_done_atom, uint64_t, bool, bucket_stats>>;

/// Coordinator: rank 0.
using coordinator_actor = caf::typed_actor<
    // Runs epochs [first, first + count); replies with each epoch's stats.
    caf::replies_to<msg::run_epochs_atom, int32_t, int32_t>::with<std::vector<epoch_stats>>>;

// --- spawning ------------------------------------------------------------------
lock_server_actor spawn_lock_server(caf::actor_system& sys, scheduler_config config);
/// `label` names the server in its error messages (and avoids CAF 0.17's
/// zero-argument spawn path, which UBSan flags inside CAF's headers).
partition_server_actor spawn_partition_server(caf::actor_system& sys, std::string label = "partition server");
parameter_server_actor spawn_parameter_server(caf::actor_system& sys, std::string label = "parameter server");
trainer_actor spawn_trainer(caf::actor_system& sys, uint32_t id, lock_server_actor lock, kernel_fn kernel);
/// `on_epoch` (optional) runs on the coordinator after each epoch, before the
/// next starts: the place for checkpoints and logs.
coordinator_actor spawn_coordinator(caf::actor_system& sys, lock_server_actor lock,
                                    std::vector<trainer_actor> trainers,
                                    std::function<void(const epoch_stats&)> on_epoch = {});

}  // namespace abg::actors
