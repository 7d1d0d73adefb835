// `abg console`'s text for each view: the inspector's JSON document
// (docs/console.md) drawn for a person.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace abg::tools {


/// The view as lines of text; the bucket grid uses letters (D done, T
/// training, . waiting), on coloured cells with `colour` (a terminal that
/// has colours).
std::string render_view(const nlohmann::json& view, bool colour = false);

} // namespace abg::tools
