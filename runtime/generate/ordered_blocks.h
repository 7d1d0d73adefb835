// Blocks of a generated graph made by several threads and consumed in block
// order by the calling thread: a ring of slots, each owning its buffer
// (allocated once, refilled per block), so a block's output goes straight
// into the slot that the consumer then reads. Shared by the TSV writer and
// the direct dataset writer (runtime/generate).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

namespace abg::generate {

template <class Buffer>
class ordered_blocks {
public:
  /// `fill(block, buffer)` runs on the generating threads; `make()` creates a slot's buffer.
  ordered_blocks(std::uint64_t blocks, unsigned threads, std::function<Buffer()> make,
                 std::function<void(std::uint64_t, Buffer&)> fill)
      : blocks_(blocks), fill_(std::move(fill)), slots_(2 * std::max(1u, threads)) {
    for (auto& s : slots_)
      s.buffer = make();
    for (unsigned t = 0; t < std::max(1u, threads); ++t)
      workers_.emplace_back([this] { generate(); });
  }
  ~ordered_blocks() {
    stop();
    workers_.clear(); // joins
  }
  ordered_blocks(const ordered_blocks&) = delete;
  ordered_blocks& operator=(const ordered_blocks&) = delete;

  /// Calls consume(block, buffer) for every block in order; stops early when it returns false.
  void for_each(const std::function<bool(std::uint64_t, const Buffer&)>& consume) {
    for (std::uint64_t b = 0; b < blocks_; ++b) {
      slot* s = nullptr;
      {
        std::unique_lock lock(mutex_);
        s = &slots_[b % slots_.size()];
        changed_.wait(lock, [&] { return s->block == b; });
      }
      const bool go_on = consume(b, s->buffer);
      std::lock_guard lock(mutex_);
      s->block.reset();
      next_write_ = b + 1;
      changed_.notify_all();
      if (!go_on)
        return;
    }
  }

private:
  struct slot {
    std::optional<std::uint64_t> block;
    Buffer buffer;
  };

  void generate() {
    while (true) {
      std::uint64_t b = 0;
      {
        std::unique_lock lock(mutex_);
        if (stopped_ || next_claim_ >= blocks_)
          return;
        b = next_claim_++;
        // The slot is free once the block that used it before was consumed.
        changed_.wait(lock, [&] { return stopped_ || b < next_write_ + slots_.size(); });
        if (stopped_)
          return;
      }
      auto& s = slots_[b % slots_.size()];
      fill_(b, s.buffer);
      std::lock_guard lock(mutex_);
      s.block = b;
      changed_.notify_all();
    }
  }
  void stop() {
    std::lock_guard lock(mutex_);
    stopped_ = true;
    changed_.notify_all();
  }

  std::uint64_t blocks_;
  std::function<void(std::uint64_t, Buffer&)> fill_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<slot> slots_;
  std::uint64_t next_claim_ = 0, next_write_ = 0;
  bool stopped_ = false;
  std::vector<std::jthread> workers_; // last: joined first
};

} // namespace abg::generate
