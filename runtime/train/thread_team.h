// A fixed team of threads that runs one phase at a time: run(f) calls f(0)
// on the calling thread and f(1) ... f(size - 1) on the team's threads, and
// returns when all have returned. The 1-vs-all kernel splits each batch's
// entity dimension among them (all_negs_step.cpp), phase by phase.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace abg::train {

class thread_team {
public:
  /// `size` threads in all (>= 1), the caller included; `init` runs once on
  /// each team thread before its first phase (thread-local settings).
  explicit thread_team(int size, std::function<void()> init = {});
  ~thread_team();
  thread_team(const thread_team&) = delete;
  thread_team& operator=(const thread_team&) = delete;

  int size() const { return size_; }

  /// Runs f(t) for every t in [0, size()); rethrows the first exception.
  void run(const std::function<void(int)>& f);

private:
  void loop(int t, std::function<void()> init);

  int size_;
  std::vector<std::thread> threads_;
  std::mutex mu_;
  std::condition_variable start_, done_;
  const std::function<void(int)>* job_ = nullptr;
  std::uint64_t generation_ = 0;
  int pending_ = 0;
  bool quit_ = false;
  std::exception_ptr error_;
};

} // namespace abg::train
