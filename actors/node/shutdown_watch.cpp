#include "actors/node/shutdown_watch.h"

#include <fmt/format.h>

namespace abg::actors {

shutdown_watch::shutdown_watch(log_fn log, std::chrono::seconds bound)
    : log_(std::move(log)), bound_(bound), thread_([this] { run(); }) {}

shutdown_watch::~shutdown_watch() {
  {
    std::lock_guard lock(m_);
    done_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void shutdown_watch::stage(std::string stage) {
  {
    std::lock_guard lock(m_);
    stage_ = std::move(stage);
    if (!armed_) since_ = std::chrono::steady_clock::now();
    armed_ = true;
  }
  cv_.notify_all();
}

void shutdown_watch::run() {
  std::unique_lock lock(m_);
  cv_.wait(lock, [&] { return armed_ || done_; });
  if (done_) return;
  if (cv_.wait_until(lock, since_ + bound_, [&] { return done_; })) return;
  const auto line = fmt::format("the exit has taken more than {} s; it is at: {}", bound_.count(), stage_);
  lock.unlock();
  if (log_) log_(line);
}

} // namespace abg::actors
