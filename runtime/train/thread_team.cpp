#include "runtime/train/thread_team.h"

namespace abg::train {

thread_team::thread_team(int size, std::function<void()> init) : size_(size < 1 ? 1 : size) {
  for (int t = 1; t < size_; ++t) threads_.emplace_back([this, t, init] { loop(t, init); });
}

thread_team::~thread_team() {
  {
    std::lock_guard lock(mu_);
    quit_ = true;
  }
  start_.notify_all();
  for (auto& t : threads_) t.join();
}

void thread_team::run(const std::function<void(int)>& f) {
  {
    std::lock_guard lock(mu_);
    job_ = &f;
    pending_ = size_ - 1;
    ++generation_;
    error_ = nullptr;
  }
  start_.notify_all();
  std::exception_ptr mine;
  try {
    f(0);
  } catch (...) {
    mine = std::current_exception();
  }
  std::unique_lock lock(mu_);
  done_.wait(lock, [&] { return pending_ == 0; });
  job_ = nullptr;
  if (mine) std::rethrow_exception(mine);
  if (error_) std::rethrow_exception(error_);
}

void thread_team::loop(int t, std::function<void()> init) {
  if (init) init();
  std::uint64_t seen = 0;
  for (;;) {
    const std::function<void(int)>* job = nullptr;
    {
      std::unique_lock lock(mu_);
      start_.wait(lock, [&] { return quit_ || generation_ != seen; });
      if (quit_) return;
      seen = generation_;
      job = job_;
    }
    std::exception_ptr err;
    try {
      (*job)(t);
    } catch (...) {
      err = std::current_exception();
    }
    std::lock_guard lock(mu_);
    if (err && !error_) error_ = err;
    if (--pending_ == 0) done_.notify_one();
  }
}

} // namespace abg::train
