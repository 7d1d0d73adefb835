#include "abg/units.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <utility>

#include <fmt/format.h>

namespace abg {

std::string size_text(std::uint64_t bytes) {
  const auto b = static_cast<double>(bytes);
  if (bytes >= (std::uint64_t{1} << 30)) return fmt::format("{:.1f} GiB", b / (1 << 30));
  if (bytes >= (std::uint64_t{1} << 20)) return fmt::format("{:.1f} MiB", b / (1 << 20));
  return fmt::format("{:.1f} KiB", b / (1 << 10));
}

namespace {

// A positive number and the lower-case unit after it.
expected<std::pair<double, std::string>> number_and_unit(std::string_view text, const char* what) {
  double value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || !(value > 0))
    return fail("'{}' is not a {}: expected a positive number and a unit", text, what);
  std::string unit(end, text.data() + text.size());
  std::erase(unit, ' ');
  std::ranges::transform(unit, unit.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return std::pair{value, unit};
}

} // namespace

expected<double> parse_rate(std::string_view text) {
  auto nu = number_and_unit(text, "rate");
  if (!nu) return std::unexpected(nu.error());
  auto [value, unit] = *nu;
  for (auto suffix : {"/s", "ps"})
    if (unit.ends_with(suffix)) unit.resize(unit.size() - 2);
  static const std::pair<const char*, double> units[] = {
    {"bit", 1.0 / 8}, {"kbit", 1e3 / 8}, {"mbit", 1e6 / 8}, {"gbit", 1e9 / 8}, {"tbit", 1e12 / 8},
    {"b", 1},         {"kb", 1e3},       {"mb", 1e6},       {"gb", 1e9},       {"tb", 1e12}};
  for (auto [name, scale] : units)
    if (unit == name) return value * scale;
  return fail("'{}': unknown rate unit '{}': use bit, Kbit, Mbit, Gbit, Tbit or B, KB, MB, GB, TB (per second)", text,
              unit);
}

expected<double> parse_duration(std::string_view text) {
  auto nu = number_and_unit(text, "duration");
  if (!nu) return std::unexpected(nu.error());
  auto [value, unit] = *nu;
  static const std::pair<const char*, double> units[] = {{"ns", 1e-9}, {"us", 1e-6}, {"ms", 1e-3}, {"s", 1}};
  for (auto [name, scale] : units)
    if (unit == name) return value * scale;
  return fail("'{}': unknown duration unit '{}': use ns, us, ms or s", text, unit);
}

} // namespace abg
