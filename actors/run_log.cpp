#include "actors/run_log.h"

#include <ctime>

#include <fmt/format.h>

namespace abg::actors {

run_log::run_log(std::filesystem::path file, std::chrono::microseconds window)
    : file_(std::move(file)), window_(window) {}

run_log::~run_log() { flush_all(); }

std::int64_t run_log::now_micros() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
    .count();
}

std::string run_log::format(const msg::log_line& line) {
  const std::time_t seconds = static_cast<std::time_t>(line.micros / 1000000);
  std::tm utc{};
  gmtime_r(&seconds, &utc);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%S", &utc);
  return fmt::format("{}.{:06}Z {}: {}", stamp, line.micros % 1000000, line.node, line.text);
}

void run_log::add(msg::log_line line) {
  if (line.text.size() > max_text) line.text.resize(max_text);
  // One line per entry: a line break inside would forge another node's line.
  for (auto& c : line.text)
    if (c == '\n' || c == '\r') c = ' ';
  if (line.micros < last_written_) {
    ++late_;
    write(line);
    if (out_.is_open()) out_.flush();
    return;
  }
  waiting_.emplace(line.micros, std::move(line));
}

void run_log::flush(std::int64_t now) {
  const auto until = now - window_.count();
  while (!waiting_.empty() && waiting_.begin()->first <= until) {
    write(waiting_.begin()->second);
    waiting_.erase(waiting_.begin());
  }
  if (out_.is_open()) out_.flush();
}

void run_log::flush_all() {
  for (auto& [at, line] : waiting_) write(line);
  waiting_.clear();
  if (out_.is_open()) out_.flush();
}

void run_log::write(const msg::log_line& line) {
  last_written_ = std::max(last_written_, line.micros);
  written_.push_back(line);
  if (written_.size() > kept) written_.pop_front();
  if (file_.empty() || problem_) return;
  if (!out_.is_open()) {
    std::error_code ec;
    if (file_.has_parent_path()) std::filesystem::create_directories(file_.parent_path(), ec);
    out_.open(file_, std::ios::app);
    if (!out_) {
      problem_ = fmt::format("cannot write the run's log {}: {}", file_.string(),
                             ec ? ec.message() : std::string("cannot open it for appending"));
      return;
    }
  }
  out_ << format(line) << '\n';
  if (!out_) problem_ = fmt::format("cannot write the run's log {} (disk full?)", file_.string());
}

std::vector<msg::log_line> run_log::tail(std::size_t n) const {
  std::vector<msg::log_line> out;
  const auto from_waiting = std::min(n, waiting_.size());
  const auto from_written = std::min(n - from_waiting, written_.size());
  out.insert(out.end(), written_.end() - static_cast<std::ptrdiff_t>(from_written), written_.end());
  auto it = waiting_.begin();
  std::advance(it, static_cast<std::ptrdiff_t>(waiting_.size() - from_waiting));
  for (; it != waiting_.end(); ++it) out.push_back(it->second);
  return out;
}

} // namespace abg::actors
