// `abg console`'s text for each view: the inspector's JSON document
// (docs/console.md) drawn for a person.
#pragma once

#include <array>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace abg::tools {

/// The views the inspector serves (docs/console.md).
constexpr std::array<std::string_view, 5> console_views{"nodes", "buckets", "trainers", "traffic", "events"};

/// The view as lines of text; the bucket grid uses letters (D done, T
/// training, . waiting), on coloured cells with `colour` (a terminal that
/// has colours).
std::string render_view(const nlohmann::json& view, bool colour = false);

} // namespace abg::tools
