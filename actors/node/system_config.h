// The actor system's configuration every abg process uses (nodes, the
// simulation, the console): abg's message types and CAF's scheduler. No
// LibTorch here: the console links this without the training kernel.
#pragma once

#include <caf/actor_system_config.hpp>

#include "abg/cluster.h"

namespace abg::actors {

/// Registers abg's messages and sets CAF's scheduler; with `spec`, also
/// loads the middleman with the cluster's heartbeats.
void configure_system(caf::actor_system_config& cfg, const cluster_spec* spec);

} // namespace abg::actors
