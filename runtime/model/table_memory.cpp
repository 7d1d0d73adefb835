// Table memory (see allocate_table in model.h). The bucket kernel gathers rows
// in random order; with 4 KiB pages nearly every row costs a TLB miss and a
// page walk (perf showed the row prefetches stalling). 2 MiB-aligned memory
// with MADV_HUGEPAGE lets the kernel back it with transparent huge pages
// where THP is enabled ("always" or "madvise"); elsewhere it is plain memory.
#include "abg/model/model.h"

#include <sys/mman.h>

#include <cstdlib>
#include <new>

namespace abg::model {

namespace {

constexpr std::size_t huge_page = std::size_t{2} << 20;

torch::Tensor huge_page_tensor(std::int64_t rows, std::int64_t cols) {
  const auto bytes = static_cast<std::size_t>(rows) * static_cast<std::size_t>(cols) * sizeof(float);
  if (bytes < huge_page) return torch::empty({rows, cols}, torch::kFloat);
  const auto rounded = (bytes + huge_page - 1) / huge_page * huge_page;
  void* p = std::aligned_alloc(huge_page, rounded);
  if (p == nullptr) throw std::bad_alloc();
  (void)madvise(p, rounded, MADV_HUGEPAGE); // advice only: without THP the memory still works
  return torch::from_blob(p, {rows, cols}, [](void* q) { std::free(q); }, torch::kFloat);
}

} // namespace

table allocate_table(std::int64_t count, std::int64_t dim, std::int64_t state_width) {
  table t;
  t.embeddings = huge_page_tensor(count, dim);
  t.state = state_width == 1 ? torch::empty({count}, torch::kFloat) : huge_page_tensor(count, state_width);
  return t;
}

} // namespace abg::model
