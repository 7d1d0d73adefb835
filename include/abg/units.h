// Sizes, rates and durations as people read and write them: "1.5 GiB",
// "10Gbit", "1GB/s", "100us".
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "abg/error.h"

namespace abg {

/// "12.0 KiB", "3.4 MiB", "1.5 GiB".
std::string size_text(std::uint64_t bytes);

/// Bytes per second of a rate: bits ("10Gbit", "100Mbit", "1gbit/s"; powers
/// of 1000) or bytes ("1.25GB", "500MB/s"); case does not matter.
expected<double> parse_rate(std::string_view text);

/// Seconds of a duration: "100us", "1.5ms", "2s", "250ns".
expected<double> parse_duration(std::string_view text);

} // namespace abg
