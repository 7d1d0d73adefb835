// Helpers shared by the doctest suites: scratch directories and file writing.
#pragma once

#include <filesystem>
#include <fstream>
#include <vector>
#include <random>
#include <string>
#include <string_view>

namespace abg::test {

/// A fresh directory under the system temp dir, removed when the object dies.
class scratch_dir {
public:
  scratch_dir() {
    std::random_device rd;
    path_ = std::filesystem::temp_directory_path() /
            ("abg-test-" + std::to_string(rd()) + std::to_string(rd()));
    std::filesystem::create_directories(path_);
  }
  ~scratch_dir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  scratch_dir(const scratch_dir&) = delete;
  scratch_dir& operator=(const scratch_dir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(std::string_view name) const { return path_ / name; }

private:
  std::filesystem::path path_;
};

inline void write_text(const std::filesystem::path& path, std::string_view text) {
  std::filesystem::create_directories(path.parent_path());
  std::ofstream out(path, std::ios::binary);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
}

/// n floats from `start` in steps of 0.25, off the grid of round numbers.
inline std::vector<float> ramp(std::size_t n, float start) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i)
    v[i] = start + 0.25f * static_cast<float>(i) - 1.0f / 3.0f;
  return v;
}

} // namespace abg::test
