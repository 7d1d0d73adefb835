// allocate_table's memory (runtime/model/table_memory.cpp): a freed table's
// block serves the next table of its size, as a partition buffer's swap frees
// one and reads the next; at most two freed blocks are kept, and none once
// a table of another size is made.
#include <doctest/doctest.h>

#include <set>
#include <vector>

#include "abg/model/model.h"

using namespace abg;

namespace {

// 2048 rows of 5120 floats: 40 MiB, above malloc's largest mmap threshold
// (32 MiB), so fresh memory comes from mmap and reads as zeros.
constexpr std::int64_t rows = 2048, dim = 5120;

const void* block_of(const model::table& t) { return t.embeddings.data_ptr(); }

} // namespace

TEST_CASE("a freed table's memory serves the next table of its size; at most two are kept, none after another size") {
  std::set<const void*> freed;
  {
    std::vector<model::table> tables;
    for (int i = 0; i < 3; ++i) tables.push_back(model::allocate_table(rows, dim));
    for (auto& t : tables) {
      CHECK(t.embeddings.size(0) == rows);
      CHECK(t.embeddings.size(1) == dim);
    }
    for (auto& t : tables) freed.insert(block_of(t));
    // Freed first to last: the first block is let go when the third comes.
    freed.erase(block_of(tables[0]));
    for (auto& t : tables) t = model::table{};
  }
  REQUIRE(freed.size() == 2);
  auto a = model::allocate_table(rows, dim);
  auto b = model::allocate_table(rows, dim);
  CHECK(freed.contains(block_of(a)));
  CHECK(freed.contains(block_of(b)));
  CHECK(block_of(a) != block_of(b));
  // Reused memory keeps what was written; fresh memory is zeros.
  a.embeddings.fill_(1.5f);
  a = model::table{};
  auto reused = model::allocate_table(rows, dim);
  CHECK(reused.embeddings.sum().item<double>() == doctest::Approx(1.5 * rows * dim));
  reused = model::table{};
  // A table of another size takes fresh memory and lets the kept blocks go:
  // the next table of the first size is fresh too.
  auto other = model::allocate_table(rows / 2, dim);
  CHECK(other.embeddings.abs().sum().item<double>() == 0.0);
  auto again = model::allocate_table(rows, dim);
  CHECK(again.embeddings.abs().sum().item<double>() == 0.0);
}
