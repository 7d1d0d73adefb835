#include "tools/progress.h"

#include <cstdio>

#include <fmt/format.h>
#include <unistd.h>

namespace abg::tools {

std::string human_count(double value) {
  if (value >= 1e9)
    return fmt::format("{:.2f}G", value / 1e9);
  if (value >= 1e6)
    return fmt::format("{:.2f}M", value / 1e6);
  if (value >= 1e4)
    return fmt::format("{:.1f}k", value / 1e3);
  return fmt::format("{:.0f}", value);
}

progress_display::progress_display(std::string unit) : unit_(std::move(unit)), terminal_(::isatty(2) != 0) {}

void progress_display::update(std::string_view phase, std::uint64_t count, double seconds, double done,
                              std::string_view extra) {
  bool new_phase = phase != phase_;
  if (new_phase) {
    finish();
    phase_ = phase;
    phase_start_ = seconds;
  }
  double interval = terminal_ ? 0.1 : 5.0;
  if (!new_phase && done < 1.0 && seconds - last_print_ < interval)
    return;
  if (!terminal_ && count == 0 && done == 0.0)
    return; // a log line saying nothing happened yet is noise
  last_print_ = seconds;
  double elapsed = seconds - phase_start_;
  double rate = elapsed > 0 ? static_cast<double>(count) / elapsed : 0.0;
  if (terminal_) {
    constexpr int width = 24;
    int filled = static_cast<int>(done * width + 0.5);
    fmt::print(stderr, "\r\033[K{} [{}{}] {:3.0f}% {} {}, {} {}/s, {:.1f}s{}", phase, std::string(filled, '#'),
               std::string(width - filled, '.'), done * 100, human_count(static_cast<double>(count)), unit_,
               human_count(rate), unit_, seconds, extra);
    open_line_ = true;
  } else {
    fmt::print(stderr, "{}: {:.0f}% {} {}, {} {}/s, {:.1f}s{}\n", phase, done * 100,
               human_count(static_cast<double>(count)), unit_, human_count(rate), unit_, seconds, extra);
  }
  std::fflush(stderr);
}

void progress_display::finish() {
  if (open_line_) {
    fmt::print(stderr, "\n");
    open_line_ = false;
  }
}

} // namespace abg::tools
