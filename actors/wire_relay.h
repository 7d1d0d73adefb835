// Wire relays: stand-ins for a partition, lock or parameter server that pass
// every request and every reply through CAF's binary serializer and back
// (tensors through the Cap'n Proto codec), exactly what crossing machines
// does to a message. `abg::cluster::train_options::over_the_wire` puts them
// between the trainers and the servers, so a one-process run exercises the
// wire format of every message of those interfaces (docs/actors.md).
#pragma once

#include <caf/all.hpp>

#include "actors/interfaces.h"

namespace abg::actors {

partition_server_actor spawn_wire_relay(caf::actor_system& sys, partition_server_actor target);
lock_server_actor spawn_wire_relay(caf::actor_system& sys, lock_server_actor target);
parameter_server_actor spawn_wire_relay(caf::actor_system& sys, parameter_server_actor target);

} // namespace abg::actors
