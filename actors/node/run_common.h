// What the simulation and a cluster node share: the actor system's
// configuration, the run's seeds, the node context, and the coordinator's
// node waiting for the run (turning the stop flag a signal set into a
// message).
#pragma once

#include <cstdint>
#include <optional>

#include <caf/all.hpp>

#include "abg/node/run.h"
#include "actors/node/assembly.h"
#include "actors/node/error_text.h"
#include "actors/node/system_config.h"

namespace abg::actors {

/// The deadlines of a cluster spec.
deadlines deadlines_of(const cluster_spec& spec);

/// The run's seed: the configured one, else random.
std::uint64_t run_seed(const node::train_options& options);

node::train_summary to_summary(const msg::run_summary& s);

/// Asks the coordinator to run and waits for its answer; once `stop` is set,
/// tells it to stop (once).
expected<node::train_summary> wait_for_run(caf::actor_system& sys, const msg::coordinator_actor& coordinator,
                                           const std::atomic<bool>* stop);

} // namespace abg::actors
