// Runs work items 0..n-1 on a few threads (dynamic assignment), each thread with
// its own state; the first exception stops the others and is returned.
#pragma once

#include <atomic>
#include <cstdint>
#include <exception>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <torch/torch.h>

#include "abg/error.h"

namespace abg::eval::detail {

/// `work(state&, item)` for every item; states[t] belongs to thread t.
template <class State, class Work>
expected<void> run_parallel(std::size_t items, std::vector<State>& states, Work&& work) {
  std::atomic<std::size_t> next{0};
  std::atomic<bool> failed{false};
  std::mutex error_mutex;
  std::string error_message;
  auto body = [&](State& state) {
    torch::NoGradGuard no_grad;
    try {
      for (std::size_t i = next++; i < items && !failed.load(); i = next++)
        work(state, i);
    } catch (const std::exception& e) {
      std::lock_guard lock(error_mutex);
      if (!failed.exchange(true))
        error_message = e.what();
    }
  };
  if (states.size() <= 1) {
    body(states.at(0));
  } else {
    std::vector<std::jthread> threads;
    threads.reserve(states.size());
    for (auto& state : states)
      threads.emplace_back([&body, &state] { body(state); });
  }
  if (failed)
    return fail("evaluation failed: {}", error_message);
  return {};
}

} // namespace abg::eval::detail
