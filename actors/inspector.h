// The inspector: the one actor `abg console` reaches (docs/console.md). It
// answers views of the run by asking the coordinator; with the run's admin
// token it also passes on the commands of `abg console --admin` (pause,
// resume, checkpoint, stop), each proven by an HMAC over a fresh nonce of its
// own (messages/admin_proof.h). Without an admin token nothing steers the run.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include <caf/all.hpp>

#include "abg/token.h"
#include "messages/interfaces.h"

namespace abg::actors {

/// Ends when the coordinator does. `admin`: the run's admin token, if it
/// has one; `log` hears of every refused admin command.
msg::inspector_actor spawn_inspector(caf::actor_system& sys, const msg::coordinator_actor& coordinator,
                                     std::optional<cluster_token> admin = std::nullopt,
                                     std::function<void(const std::string&)> log = {});

} // namespace abg::actors
