// Log lines collected from any thread (a gate's, a watch's, an actor's), for
// tests to look for what a component said.
#pragma once

#include <cstddef>
#include <mutex>
#include <string>
#include <vector>

namespace abg::test {

class log_lines {
public:
  void add(const std::string& line) {
    std::lock_guard lock(m_);
    lines_.push_back(line);
  }
  std::vector<std::string> lines() {
    std::lock_guard lock(m_);
    return lines_;
  }
  /// Lines that contain `text`.
  std::size_t count(const std::string& text) {
    std::lock_guard lock(m_);
    std::size_t n = 0;
    for (const auto& l : lines_) n += l.find(text) != std::string::npos ? 1 : 0;
    return n;
  }
  bool has(const std::string& text) { return count(text) > 0; }
  /// Every line, each ended by a newline (for CAPTURE).
  std::string all() {
    std::lock_guard lock(m_);
    std::string out;
    for (const auto& l : lines_) out += l + "\n";
    return out;
  }

private:
  std::mutex m_;
  std::vector<std::string> lines_;
};

} // namespace abg::test
