// The inspector: the one actor `abg console` reaches (docs/console.md). It
// answers views of the run by asking the coordinator, and can do nothing
// else, so a console attached to a run reads it and never steers it.
#pragma once

#include <caf/all.hpp>

#include "messages/interfaces.h"

namespace abg::actors {

/// Ends when the coordinator does.
msg::inspector_actor spawn_inspector(caf::actor_system& sys, const msg::coordinator_actor& coordinator);

} // namespace abg::actors
