// Table memory (see allocate_table in model.h). The bucket kernel gathers rows
// in random order; with 4 KiB pages nearly every row costs a TLB miss and a
// page walk (perf showed the row prefetches stalling). 2 MiB-aligned memory
// with MADV_HUGEPAGE lets the kernel back it with transparent huge pages
// where THP is enabled ("always" or "madvise"); elsewhere it is plain memory.
//
// A trainer with a partition buffer frees a partition's table after its
// write-back and allocates one of the same size for the next read: fresh
// memory costs the kernel a page fault and zeroing per huge page (perf:
// clear_page_erms under folio_zero_user, 22% of both cores in a buffered run
// of 258 MB partitions). So the last blocks freed are kept for the next
// allocation of their size: at most two (a bucket's two partitions), which
// is what a swap frees and then reads, so the memory held stays what was
// just freed; an allocation of another size lets them go.
#include "abg/model/model.h"

#include <sys/mman.h>

#include <cstdlib>
#include <mutex>
#include <new>
#include <utility>
#include <vector>

namespace abg::model {

namespace {

constexpr std::size_t huge_page = std::size_t{2} << 20;
constexpr std::size_t blocks_kept = 2;

// Freed blocks (pointer, rounded size), the most recent last.
struct freed_blocks {
  std::mutex mutex;
  std::vector<std::pair<void*, std::size_t>> blocks;

  // A block of `rounded` bytes, or null. On a miss the blocks kept are
  // let go first, so that they never add to what a different allocation
  // pattern (another type's partitions, an evaluation) holds.
  void* take(std::size_t rounded) {
    std::vector<std::pair<void*, std::size_t>> released;
    {
      std::lock_guard lock(mutex);
      for (auto it = blocks.rbegin(); it != blocks.rend(); ++it)
        if (it->second == rounded) {
          void* p = it->first;
          blocks.erase(std::next(it).base());
          return p;
        }
      released.swap(blocks);
    }
    for (auto& b : released) std::free(b.first);
    return nullptr;
  }
  void give(void* p, std::size_t rounded) {
    void* evicted = nullptr;
    {
      std::lock_guard lock(mutex);
      if (blocks.size() == blocks_kept) {
        evicted = blocks.front().first;
        blocks.erase(blocks.begin());
      }
      blocks.emplace_back(p, rounded);
    }
    std::free(evicted);
  }
};

// Never destroyed: tables may be freed during static destruction.
freed_blocks& freed() {
  static auto* f = new freed_blocks;
  return *f;
}

torch::Tensor huge_page_tensor(std::int64_t rows, std::int64_t cols) {
  const auto bytes = static_cast<std::size_t>(rows) * static_cast<std::size_t>(cols) * sizeof(float);
  if (bytes < huge_page) return torch::empty({rows, cols}, torch::kFloat);
  const auto rounded = (bytes + huge_page - 1) / huge_page * huge_page;
  void* p = freed().take(rounded);
  if (p == nullptr) {
    p = std::aligned_alloc(huge_page, rounded);
    if (p == nullptr) throw std::bad_alloc();
    (void)madvise(p, rounded, MADV_HUGEPAGE); // advice only: without THP the memory still works
  }
  return torch::from_blob(p, {rows, cols}, [rounded](void* q) { freed().give(q, rounded); }, torch::kFloat);
}

} // namespace

table allocate_table(std::int64_t count, std::int64_t dim, std::int64_t state_width) {
  table t;
  t.embeddings = huge_page_tensor(count, dim);
  t.state = state_width == 1 ? torch::empty({count}, torch::kFloat) : huge_page_tensor(count, state_width);
  return t;
}

} // namespace abg::model
