// allocate_table's memory (runtime/model/table_memory.cpp): a freed table's
// block serves the next table of its size, as a partition buffer's swap frees
// one and reads the next; at most two freed blocks are kept.
#include <doctest/doctest.h>

#include <set>
#include <vector>

#include "abg/model/model.h"

using namespace abg;

namespace {

// 2048 rows of 1024 floats: 8 MiB, four huge pages.
constexpr std::int64_t rows = 2048, dim = 1024;

const void* block_of(const model::table& t) { return t.embeddings.data_ptr(); }

} // namespace

TEST_CASE("a freed table's memory serves the next table of its size, and at most two are kept") {
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
  // Another size takes fresh memory, and reused memory holds what is written.
  auto other = model::allocate_table(rows / 2, dim);
  CHECK_FALSE(freed.contains(block_of(other)));
  a.embeddings.fill_(1.5f);
  CHECK(a.embeddings.sum().item<double>() == doctest::Approx(1.5 * rows * dim));
}
