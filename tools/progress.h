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
  /// done == 1 always prints. `extra` ends the line (", loss 0.52, ETA 3 min").
  void update(std::string_view phase, std::uint64_t count, double seconds, double done, std::string_view extra = {});
  /// Whether it redraws a bar (stderr is a terminal) rather than printing lines.
  bool terminal() const { return terminal_; }
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
