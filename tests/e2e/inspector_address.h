// Where a run's inspector listens, read from the line the run prints
// ("inspector listening on HOST:PORT ...", docs/console.md).
#pragma once

#include <string>

namespace abg::test {

/// HOST:PORT after "inspector listening on " in `log`, or empty.
inline std::string inspector_address(const std::string& log) {
  const std::string mark = "inspector listening on ";
  auto at = log.find(mark);
  if (at == std::string::npos) return "";
  at += mark.size();
  return log.substr(at, log.find_first_of(" \n", at) - at);
}

} // namespace abg::test
