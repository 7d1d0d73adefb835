// How a caf::error reads to a person.
#pragma once

#include <string>

#include <caf/actor_system.hpp>
#include <caf/error.hpp>

namespace abg::actors {

/// What a role's error says: its own text when it carries one (the roles
/// make their errors with a sentence), else CAF's rendering.
std::string error_text(caf::actor_system& sys, const caf::error& e);

} // namespace abg::actors
