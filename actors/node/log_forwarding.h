// A node's log lines, printed where the node runs and forwarded to the
// coordinator for the run's log (actors/run_log.h). Lines logged before the
// coordinator is known (a node waiting for it, fetching data) wait here,
// with the time they were logged, and go once it is.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "abg/node/run.h"
#include "messages/interfaces.h"

namespace abg::actors {

class log_forwarding : public std::enable_shared_from_this<log_forwarding> {
public:
  /// Lines kept while the coordinator is not known yet (the oldest go first).
  static constexpr std::size_t max_waiting = 1000;

  /// `node`: this node's name in the cluster; `local`: where it prints (may be empty).
  static std::shared_ptr<log_forwarding> make(std::string node, std::function<void(std::string_view)> local);

  /// `callbacks` with their log lines forwarded too, and a line in the
  /// run's log for each bucket and iteration done (the coordinator's node
  /// prints those its own way).
  node::train_callbacks wrap(node::train_callbacks callbacks);
  /// Prints locally and forwards; safe from any thread.
  std::function<void(std::string_view)> callback();
  /// Forwards without printing (what the run's log holds beyond the node's output).
  void record(std::string_view text);
  /// From now on lines go to `coordinator`; those waiting go first.
  void connect(msg::coordinator_actor coordinator);

private:
  log_forwarding(std::string node, std::function<void(std::string_view)> local);
  void forward(std::string_view text);

  std::string node_;
  std::function<void(std::string_view)> local_;
  std::mutex mutex_;
  msg::coordinator_actor coordinator_;
  std::vector<msg::log_line> waiting_;
};

} // namespace abg::actors
