// The actor a node of a multi-process cluster publishes on its port: it
// dials the peers the coordinator names (direct routes between nodes),
// probes the other nodes' bulk channels for a check, and passes the
// coordinator's `finish` on to the node's main thread.
#pragma once

#include <caf/all.hpp>
#include <caf/io/middleman_actor.hpp>

#include "messages/interfaces.h"

namespace abg::actors {

/// `main` gets (finish_atom, int32_t code, std::string why); peers are
/// dialled through `mm` (the node's gated middleman actor).
msg::node_actor spawn_node_actor(caf::actor_system& sys, caf::actor main, caf::timespan deadline,
                                 caf::io::middleman_actor mm);

} // namespace abg::actors
