#include "actors/job_thread.h"

#include "actors/role_traffic.h"

namespace abg::actors {

job_thread::job_thread(std::string role)
    : thread_([this, role = std::move(role)](std::stop_token stop) mutable {
        role_traffic::set_thread_role(std::move(role));
        for (;;) {
          std::function<void()> job;
          {
            std::unique_lock lock(mutex_);
            if (!ready_.wait(lock, stop, [this] { return !queue_.empty(); }))
              return;
            job = std::move(queue_.front());
            queue_.pop_front();
          }
          job();
        }
      }) {}

job_thread::~job_thread() {
  thread_.request_stop();
  if (thread_.joinable())
    thread_.join();
}

void job_thread::post(std::function<void()> job) {
  {
    std::lock_guard lock(mutex_);
    queue_.push_back(std::move(job));
  }
  ready_.notify_one();
}

} // namespace abg::actors
