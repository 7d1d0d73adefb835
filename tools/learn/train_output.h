// What `abg train` and `abg node` print while training: log lines, a
// progress bar with loss and ETA (plain lines, one per bucket, when stderr
// is not a terminal), one line per iteration with a table of the trainers
// when it had several buckets, and the summary at the end.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <optional>
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
  struct trainer_tally {
    std::int64_t buckets = 0, edges = 0;
    double seconds = 0, loss = 0;
  };
  void bucket_done(const node::bucket_report& r);
  void print_trainers();

  std::string prefix_;
  std::map<std::uint32_t, trainer_tally> trainers_; // this iteration's, by trainer id
  std::optional<std::int64_t> first_iteration_;     // this process's first (a resumed run starts later)
  double training_start_ = 0;                       // when it began, in seconds since started_
  progress_display display_{"edges"};
  std::string phase_ = "training", shown_;
  std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
};

} // namespace abg::tools
