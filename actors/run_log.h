// The run's log (docs/console.md, "The run's log"): every node's log lines,
// forwarded to the coordinator, written to one file beside the checkpoint
// with each line's node and time, and its tail kept for the console's `log`
// view. Lines from different nodes arrive out of order (each node sends as
// it logs), so they wait `window` before they are written, in time order; a
// line that arrives later than that (a node that was cut off) is written
// when it arrives and counted as late.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "messages/payloads.h"

namespace abg::actors {

class run_log {
public:
  /// A line longer than this is cut there (a node's log is not a bulk channel).
  static constexpr std::size_t max_text = 4096;
  /// Lines kept for the console.
  static constexpr std::size_t kept = 500;

  /// `file` empty: no file, the tail only. The file is appended to (a
  /// resumed run continues it) and opened at the first line written.
  explicit run_log(std::filesystem::path file, std::chrono::microseconds window = std::chrono::seconds(2));
  run_log(const run_log&) = delete;
  run_log& operator=(const run_log&) = delete;
  /// Writes what is still waiting.
  ~run_log();

  void add(msg::log_line line);
  /// Writes the lines logged before `now - window` (microseconds since the Unix epoch).
  void flush(std::int64_t now_micros);
  void flush_all();
  /// The last `n` lines in time order, those still waiting included.
  std::vector<msg::log_line> tail(std::size_t n) const;

  const std::filesystem::path& file() const { return file_; }
  std::uint64_t late() const { return late_; }
  /// Why the file cannot be written, once it could not (the tail goes on).
  const std::optional<std::string>& problem() const { return problem_; }

  /// "2026-12-03T14:40:01.123456Z NODE: TEXT"
  static std::string format(const msg::log_line& line);
  static std::int64_t now_micros();

private:
  void write(const msg::log_line& line);

  std::filesystem::path file_;
  std::chrono::microseconds window_;
  std::ofstream out_;
  std::optional<std::string> problem_;
  std::multimap<std::int64_t, msg::log_line> waiting_; // by time
  std::deque<msg::log_line> written_;                  // the newest last, at most `kept`
  std::int64_t last_written_ = 0;
  std::uint64_t late_ = 0;
};

} // namespace abg::actors
