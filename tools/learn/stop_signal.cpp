#include "tools/learn/stop_signal.h"

#include <csignal>

namespace abg::tools {

namespace {

std::atomic<bool> stop_requested{false};
std::atomic<int> stop_signal{0};

extern "C" void on_stop_signal(int signo) {
  stop_signal = signo;
  stop_requested = true;
}

} // namespace

const std::atomic<bool>& install_stop_signals() {
  std::signal(SIGINT, on_stop_signal);
  std::signal(SIGTERM, on_stop_signal);
  return stop_requested;
}

int stopped_exit_code() { return 128 + stop_signal.load(); }

} // namespace abg::tools
