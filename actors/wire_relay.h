// Wire relays: stand-ins for a role (partition, lock or parameter server,
// trainer, coordinator) that pass every request and every reply through CAF's
// binary serializer and back (tensors through the Cap'n Proto codec), exactly
// what crossing machines does to a message.
// `abg::cluster::train_options::over_the_wire` puts one in front of every
// role, so a one-process run exercises the wire format of every message
// between roles (docs/actors.md).
#pragma once

#include <caf/all.hpp>

#include "actors/interfaces.h"

namespace abg::actors {

partition_server_actor spawn_wire_relay(caf::actor_system& sys, partition_server_actor target);
lock_server_actor spawn_wire_relay(caf::actor_system& sys, lock_server_actor target);
parameter_server_actor spawn_wire_relay(caf::actor_system& sys, parameter_server_actor target);
trainer_actor spawn_wire_relay(caf::actor_system& sys, trainer_actor target);
coordinator_actor spawn_wire_relay(caf::actor_system& sys, coordinator_actor target);

} // namespace abg::actors
