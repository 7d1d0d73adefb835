// Expected failures (bad input, corrupt files, refused locks) travel as values,
// CAF-style: a function that can fail returns abg::expected<T>.
#pragma once

#include <expected>
#include <string>
#include <utility>

#include <fmt/format.h>

namespace abg {

/// A failure the user can act on: the message names the place and the fix.
struct error {
  std::string message;
  /// Between nodes: a peer went down, stopped answering in time, or the
  /// caller was stopped. Not a fault of the input; whoever coordinates
  /// decides what to do (re-queue, roll back).
  bool lost_peer = false;
};

template <class T>
using expected = std::expected<T, error>;

/// Builds an unexpected value from a fmt format string.
template <class... Ts>
std::unexpected<error> fail(fmt::format_string<Ts...> format, Ts&&... args) {
  return std::unexpected<error>(error{fmt::format(format, std::forward<Ts>(args)...)});
}

} // namespace abg
