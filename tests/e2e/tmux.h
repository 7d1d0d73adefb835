// A person at a terminal, automated: a tmux server of the test's own (its
// socket in a scratch folder), panes running commands, keys sent with
// `send-keys` and the screen read back with `capture-pane`.
#pragma once

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>

#include <fmt/format.h>

#include "tests/e2e/cli.h"

namespace abg::test {

class tmux_server {
public:
  /// Whether tmux is installed (tools/debian-packages.txt installs it).
  static bool available() { return std::system("tmux -V >/dev/null 2>&1") == 0; }

  explicit tmux_server(std::filesystem::path socket) : socket_(std::move(socket)) {}
  ~tmux_server() { run("kill-server"); }
  tmux_server(const tmux_server&) = delete;
  tmux_server& operator=(const tmux_server&) = delete;

  /// `tmux ARGS` on this server; its exit status.
  int run(const std::string& args) const {
    return std::system(fmt::format("tmux -S {} {} >/dev/null 2>&1", shell_quote(socket_.string()), args).c_str());
  }
  /// A detached session `name` of 260x50 cells (two panes of 129 columns) running `command` in its first pane.
  bool start(const std::string& name, const std::string& command) const {
    return run(fmt::format("new-session -d -s {} -x 260 -y 50 {}", name, shell_quote(command))) == 0;
  }
  /// A second pane beside the first, running `command`.
  bool split(const std::string& name, const std::string& command) const {
    return run(fmt::format("split-window -h -t {}:0 {}", name, shell_quote(command))) == 0;
  }
  /// Keys as tmux names them ("buckets", "Enter", "Tab", "Up", "q").
  bool keys(const std::string& pane, const std::string& keys) const {
    return run(fmt::format("send-keys -t {} {}", pane, keys)) == 0;
  }
  /// The pane's screen as text (no colours).
  std::string screen(const std::string& pane) const {
    std::string out;
    auto cmd = fmt::format("tmux -S {} capture-pane -p -t {} 2>/dev/null", shell_quote(socket_.string()), pane);
    if (FILE* p = ::popen(cmd.c_str(), "r")) {
      char buf[4096];
      for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
      ::pclose(p);
    }
    return out;
  }
  /// Waits until `seen(screen)` holds, polling every 100 ms, `timeout` at most.
  template <class Pred>
  bool wait_for(const std::string& pane, Pred seen, std::chrono::seconds timeout) const {
    const auto end = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < end) {
      if (seen(screen(pane))) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return seen(screen(pane));
  }

private:
  std::filesystem::path socket_;
};

} // namespace abg::test
