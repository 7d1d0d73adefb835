// A role's own worker thread: runs blocking jobs (partition transfers, the
// bucket kernel, checkpoint writes) one after another, in the order queued,
// away from CAF's scheduler threads. Destruction finishes the running job,
// drops the queued ones and joins.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "messages/messages.h"

namespace abg::actors {

class job_thread {
public:
  /// `role`: whose jobs it runs (role_traffic's thread role).
  explicit job_thread(std::string role);
  ~job_thread();
  job_thread(const job_thread&) = delete;
  job_thread& operator=(const job_thread&) = delete;

  void post(std::function<void()> job);

private:
  std::mutex mutex_;
  std::condition_variable_any ready_;
  std::deque<std::function<void()>> queue_;
  std::jthread thread_; // last: stopped and joined first
};

/// An actor's jobs: `work` runs on the job thread, then `then` on the actor
/// once the actor handles the `job_done` message the job sends it (its
/// interface must accept (job_done_atom, uint64_t) and call done()). The two
/// share one Result (with a `std::string error`, set when work throws).
template <class Result>
class job_runner {
public:
  using fn = std::function<void(Result&)>;

  explicit job_runner(std::string role) : thread_(std::move(role)) {}

  template <class Handle>
  void post(const Handle& me, fn work, fn then) {
    const auto token = ++next_;
    auto slot = std::make_shared<Result>();
    continuations_.emplace(token, [slot, then = std::move(then)] { then(*slot); });
    thread_.post([slot, work = std::move(work), me, token] {
      try {
        work(*slot);
      } catch (const std::exception& e) {
        slot->error = e.what();
      }
      caf::anon_send(me, msg::job_done_atom::value, token);
    });
  }

  /// On the actor: runs the continuation of job `token`.
  void done(std::uint64_t token) {
    auto it = continuations_.find(token);
    if (it == continuations_.end())
      return;
    auto then = std::move(it->second);
    continuations_.erase(it);
    then();
  }

private:
  std::uint64_t next_ = 0;
  std::map<std::uint64_t, std::function<void()>> continuations_;
  job_thread thread_; // last: joined first
};

} // namespace abg::actors
