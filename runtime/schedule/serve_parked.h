// Serving the trainers parked on a `wait` grant, after anything that may
// allow them a bucket: the lock server's rule, which the cluster simulator
// follows too (tests/actors/lock_replay_test.cpp checks they agree).
#pragma once

#include "runtime/schedule/bucket_scheduler.h"

namespace abg::schedule {

/// Asks for each entry of `parked` (a sequence container), in the order they asked,
/// `try_serve(entry)`: true when it got a grant other than `wait` (it is then
/// removed). A parked trainer that does not wait alone holds nothing (it
/// would have been told to drop it), so all of those see the same grid: once
/// one is told to wait, so is every later one, and those are not asked (with
/// hundreds of trainers, asking each after every unlock cost more than the
/// training). One that waits alone, for partitions handed to its reservation
/// or for its own write-back, is asked on its own and holds up nobody
/// (bucket_scheduler::waits_alone).
template <class Parked, class TrainerOf, class TryServe>
void serve_parked(const bucket_scheduler& scheduler, Parked& parked, TrainerOf trainer_of, TryServe try_serve) {
  bool rest_wait = false;
  std::erase_if(parked, [&](auto& entry) {
    const bool alone = scheduler.waits_alone(trainer_of(entry));
    if (rest_wait && !alone) return false;
    if (try_serve(entry)) return true;
    rest_wait = rest_wait || !alone;
    return false;
  });
}

} // namespace abg::schedule
