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

namespace abg::actors {

/// Registers abg's messages and sets CAF's scheduler; with `spec`, also
/// loads the middleman with the cluster's heartbeats.
void configure_system(caf::actor_system_config& cfg, const cluster_spec* spec);

/// The deadlines of a cluster spec.
deadlines deadlines_of(const cluster_spec& spec);

/// What a role's error says: its own text when it carries one (the roles
/// make their errors with a sentence), else CAF's rendering.
std::string error_text(caf::actor_system& sys, const caf::error& e);

/// The run's seed: the configured one, else random.
std::uint64_t run_seed(const node::train_options& options);

node::train_summary to_summary(const msg::run_summary& s);

/// Asks the coordinator to run and waits for its answer; once `stop` is set,
/// tells it to stop (once).
expected<node::train_summary> wait_for_run(caf::actor_system& sys, const msg::coordinator_actor& coordinator,
                                           const std::atomic<bool>* stop);

} // namespace abg::actors
