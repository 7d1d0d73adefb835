// SIGINT and SIGTERM as a flag the node's main thread turns into a `stop`
// message (the roles never see the signal), and the shell's exit status.
#pragma once

#include <atomic>

namespace abg::tools {

/// Installs the handlers; the flag is set by the first SIGINT or SIGTERM.
const std::atomic<bool>& install_stop_signals();

/// 128 + the signal that stopped the run (130 for SIGINT, 143 for SIGTERM).
int stopped_exit_code();

} // namespace abg::tools
