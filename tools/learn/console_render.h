// `abg console`'s text for each view: the inspector's JSON document
// (docs/console.md) drawn for a person.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace abg::tools {

/// The view as lines of text; the bucket grid uses letters (D done, T
/// training, . waiting).
std::string render_view(const nlohmann::json& view);

} // namespace abg::tools
