// The views of a run that the inspector serves and `abg console` shows
// (docs/console.md), in the order `help` lists them.
#pragma once

#include <array>
#include <string_view>

namespace abg::msg {

inline constexpr std::array<std::string_view, 8> views{"nodes", "buckets", "partitions", "params",
                                                       "trainers", "traffic", "events", "log"};

} // namespace abg::msg
