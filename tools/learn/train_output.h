// What `abg train` and `abg node` print while training: log lines, a
// progress bar (plain lines when stderr is not a terminal), one line per
// iteration and the summary at the end.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "abg/node/run.h"
#include "tools/progress.h"

namespace abg::tools {

class train_output {
public:
  /// `prefix` starts every log line (a node's name in a cluster; "" alone).
  explicit train_output(std::string prefix = "");
  node::train_callbacks callbacks();
  /// The closing lines of the coordinator's node.
  void summary(const node::train_summary& s, const config& cfg);
  void finish() { display_.finish(); }

private:
  std::string prefix_;
  progress_display display_{"edges"};
  std::string phase_ = "training", shown_;
  std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
};

} // namespace abg::tools
