// Runs the built `abg` binary the way a user does and captures what it prints.
#pragma once

#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

namespace abg::test {

struct cli_result {
  int exit_code = -1;
  std::string out, err;
};

inline std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s)
    q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

/// The whole content of a file ("" when it does not exist).
inline std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

/// Runs `abg ARGS...` in `cwd` with `input` as stdin; stdout and stderr are captured separately.
inline cli_result run_abg(const std::vector<std::string>& args, const std::filesystem::path& cwd,
                          const std::filesystem::path& input = "/dev/null") {
  auto out_file = cwd / ".abg-test-stdout", err_file = cwd / ".abg-test-stderr";
  std::string cmd = "cd ";
  cmd.append(shell_quote(cwd.string())).append(" && ").append(shell_quote(ABG_BINARY));
  for (auto& a : args)
    cmd.append(" ").append(shell_quote(a));
  // Appended piecewise: GCC 12 warns falsely on `"literal" + std::string&&` at -O3.
  cmd.append(" >").append(shell_quote(out_file.string()));
  cmd.append(" 2>").append(shell_quote(err_file.string()));
  cmd.append(" <").append(shell_quote(input.string()));
  int status = std::system(cmd.c_str());
  cli_result r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = read_file(out_file);
  r.err = read_file(err_file);
  std::filesystem::remove(out_file);
  std::filesystem::remove(err_file);
  return r;
}

/// `abg ARGS...` started as a child process in `cwd` (stdin and stdout
/// /dev/null, stderr to `stderr_file`), for tests that signal a running
/// command. The destructor SIGKILLs and reaps a child still running.
class abg_process {
public:
  /// `wrapper`: a command that runs abg, absolute path first (e.g. `/usr/sbin/ip netns exec NS`).
  abg_process(const std::vector<std::string>& args, const std::filesystem::path& cwd,
              const std::filesystem::path& stderr_file, const std::vector<std::string>& wrapper = {}) {
    std::vector<std::string> all = wrapper;
    all.push_back(ABG_BINARY);
    all.insert(all.end(), args.begin(), args.end());
    start(all, cwd, stderr_file);
  }
  /// Another program than abg (`argv`, absolute path first): a server a test runs beside abg.
  struct other_program {};
  abg_process(other_program, const std::vector<std::string>& argv, const std::filesystem::path& cwd,
              const std::filesystem::path& stderr_file) {
    start(argv, cwd, stderr_file);
  }

private:
  void start(std::vector<std::string> all, const std::filesystem::path& cwd, const std::filesystem::path& stderr_file) {
    // Everything the child needs is prepared before fork: after it, only
    // async-signal-safe calls.
    std::vector<char*> argv;
    for (auto& a : all)
      argv.push_back(a.data());
    argv.push_back(nullptr);
    std::string dir = cwd.string(), err = stderr_file.string();
    pid_ = ::fork();
    if (pid_ == 0) {
      int null = ::open("/dev/null", O_RDWR);
      int errfd = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (null < 0 || errfd < 0 || ::chdir(dir.c_str()) != 0)
        ::_exit(127);
      ::dup2(null, 0);
      ::dup2(null, 1);
      ::dup2(errfd, 2);
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
  }

public:
  ~abg_process() {
    if (running()) {
      ::kill(pid_, SIGKILL);
      wait_for(std::chrono::seconds(60));
    }
  }
  abg_process(const abg_process&) = delete;
  abg_process& operator=(const abg_process&) = delete;

  bool started() const { return pid_ > 0; }
  /// False once the child has exited (it is reaped then; status() says how).
  bool running() {
    if (status_ || pid_ <= 0)
      return false;
    int st = 0;
    if (::waitpid(pid_, &st, WNOHANG) == pid_)
      status_ = st;
    return !status_;
  }
  void signal(int sig) const { ::kill(pid_, sig); }
  /// Waits at most `timeout` for the child to exit: its wait status, or none if it is still running.
  std::optional<int> wait_for(std::chrono::steady_clock::duration timeout) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (running() && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    return status_;
  }
  /// Polls `done` every 10 ms until it holds, the child exits or `timeout` passes; returns done().
  template <class Pred> bool wait_until(Pred done, std::chrono::steady_clock::duration timeout) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!done() && running() && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    return done();
  }
  std::optional<int> status() const { return status_; }

private:
  pid_t pid_ = -1;
  std::optional<int> status_;
};

/// ../shared/data/NAME beside the project, where the benchmark datasets live.
inline std::filesystem::path shared_dataset(const std::string& name) {
  return std::filesystem::path(ABG_SOURCE_DIR) / ".." / "shared" / "data" / name;
}

} // namespace abg::test
