// Names the stage a node's exit is stuck in: once armed, a line goes to the
// log when the exit has taken longer than a bound (stopping the roles,
// closing the bulk channel or CAF's connections, the actor system's end),
// so that a node that does not exit says where it hangs.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace abg::actors {

class shutdown_watch {
public:
  using log_fn = std::function<void(const std::string&)>;
  /// `log` gets one line when an armed exit takes longer than `bound`.
  shutdown_watch(log_fn log, std::chrono::seconds bound);
  /// Ends the watch (the exit is done): no line after this.
  ~shutdown_watch();
  shutdown_watch(const shutdown_watch&) = delete;
  shutdown_watch& operator=(const shutdown_watch&) = delete;

  /// The exit begins at `stage`; the first call starts the clock.
  void stage(std::string stage);

  /// Sets the stage when destroyed: declared between two objects, it marks
  /// the point after the later one's destructor and before the earlier one's.
  class marker {
  public:
    marker(shutdown_watch& w, std::string stage) : w_(w), stage_(std::move(stage)) {}
    ~marker() { w_.stage(stage_); }
    marker(const marker&) = delete;
    marker& operator=(const marker&) = delete;

  private:
    shutdown_watch& w_;
    std::string stage_;
  };

private:
  void run();
  log_fn log_;
  std::chrono::seconds bound_;
  std::mutex m_;
  std::condition_variable cv_;
  std::string stage_;
  bool armed_ = false, done_ = false;
  std::chrono::steady_clock::time_point since_;
  std::thread thread_;
};

} // namespace abg::actors
