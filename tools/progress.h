// Progress for long phases: a redrawn bar on a terminal, plain periodic lines
// otherwise (logs, CI). Always written to stderr.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace abg::tools {

class progress_display {
public:
  explicit progress_display(std::string unit);
  /// `seconds` since the whole run started, `done` in 0..1; a phase change or
  /// done == 1 always prints.
  void update(std::string_view phase, std::uint64_t count, double seconds, double done);
  /// Ends the current line on a terminal.
  void finish();

private:
  std::string unit_;
  std::string phase_;
  bool terminal_;
  double last_print_ = -1e9;
  double phase_start_ = 0; // rates are per phase
  bool open_line_ = false;
};

/// 1234567 -> "1.23M"
std::string human_count(double value);

} // namespace abg::tools
