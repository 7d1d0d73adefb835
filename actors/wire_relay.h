// Wire relays: stand-ins for a server role (partition, lock or parameter
// server) that pass every request and every reply through CAF's binary
// serializer and back (tensors through the Cap'n Proto codec), exactly what
// crossing machines does to a message. `abg::node::train_options::over_the_wire`
// puts one in front of every server of a one-process run, so it exercises
// the wire format of every request to them (docs/actors.md); runs across
// processes serialize everything anyway.
#pragma once

#include <caf/all.hpp>

#include "messages/interfaces.h"

namespace abg::actors {

msg::partition_server_actor spawn_wire_relay(caf::actor_system& sys, msg::partition_server_actor target);
msg::lock_server_actor spawn_wire_relay(caf::actor_system& sys, msg::lock_server_actor target);
msg::parameter_server_actor spawn_wire_relay(caf::actor_system& sys, msg::parameter_server_actor target);

} // namespace abg::actors
