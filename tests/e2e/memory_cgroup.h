// A cgroup (v1 memory controller) made and removed by a test: a memory limit
// for the processes it runs, and the peak the kernel counted for them
// (memory.max_usage_in_bytes: anonymous memory and page cache, mapped files
// included). Needs root and the v1 memory controller mounted at
// /sys/fs/cgroup/memory; `why_not` says why when it could not be made.
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

#include <fmt/format.h>

#include "tests/e2e/cli.h"

namespace abg::test {

class memory_cgroup {
public:
  explicit memory_cgroup(std::uint64_t limit_bytes) {
    const std::filesystem::path root = "/sys/fs/cgroup/memory";
    if (::geteuid() != 0) {
      why_not_ = "it needs root (a cgroup of its own)";
      return;
    }
    if (!std::filesystem::exists(root / "memory.limit_in_bytes")) {
      why_not_ = "the cgroup v1 memory controller is not mounted at /sys/fs/cgroup/memory";
      return;
    }
    dir_ = root / fmt::format("abg-test-{}-{}", ::getpid(), counter()++);
    std::error_code ec;
    if (!std::filesystem::create_directory(dir_, ec)) {
      why_not_ = fmt::format("cannot create {}: {}", dir_.string(), ec ? ec.message() : "it exists");
      dir_.clear();
      return;
    }
    // No swap here, but a limit on memory+swap keeps it so where there is.
    if (!write("memory.limit_in_bytes", std::to_string(limit_bytes)))
      why_not_ = fmt::format("cannot set {}", (dir_ / "memory.limit_in_bytes").string());
    write("memory.memsw.limit_in_bytes", std::to_string(limit_bytes));
  }
  ~memory_cgroup() {
    if (dir_.empty()) return;
    // Its processes have ended (the test waited for them); a few tries while the kernel lets go.
    for (int i = 0; i < 50 && ::rmdir(dir_.c_str()) != 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  memory_cgroup(const memory_cgroup&) = delete;
  memory_cgroup& operator=(const memory_cgroup&) = delete;

  /// Empty when the group is ready.
  const std::string& why_not() const { return why_not_; }

  /// abg_process's wrapper: a shell that moves itself into the group, then becomes the command.
  /// With `stdout_file`, the command's standard output goes there.
  std::vector<std::string> wrapper(const std::filesystem::path& stdout_file = {}) const {
    return {"/bin/sh", "-c",
            fmt::format("echo $$ > {} && exec \"$@\"{}", shell_quote((dir_ / "cgroup.procs").string()),
                        stdout_file.empty() ? std::string() : " > " + shell_quote(stdout_file.string())),
            "sh"};
  }

  std::uint64_t max_usage() const { return number("memory.max_usage_in_bytes"); }
  /// Times the limit was hit (the kernel reclaimed, or failed to).
  std::uint64_t failures() const { return number("memory.failcnt"); }
  /// Processes of the group the kernel's OOM killer killed.
  std::uint64_t oom_kills() const {
    std::ifstream in(dir_ / "memory.oom_control");
    std::string key;
    std::uint64_t value = 0;
    while (in >> key >> value)
      if (key == "oom_kill") return value;
    return 0;
  }

private:
  static int& counter() {
    static int n = 0;
    return n;
  }
  bool write(const char* file, const std::string& value) const {
    std::ofstream out(dir_ / file);
    out << value;
    out.flush();
    return static_cast<bool>(out);
  }
  std::uint64_t number(const char* file) const {
    std::ifstream in(dir_ / file);
    std::uint64_t v = 0;
    in >> v;
    return v;
  }
  std::filesystem::path dir_;
  std::string why_not_;
};

} // namespace abg::test
