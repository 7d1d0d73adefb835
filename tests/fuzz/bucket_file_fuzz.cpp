// Bucket files (an edge path's edges of one bucket): the reader validates
// header, size and checksums; an input whose first byte is odd has its
// checksums resealed so the fuzzer gets past them to the layout checks, and
// then every edge of a file that opened is read (ASan catches a column that
// runs past the mapping).
#include <cstdlib>

#include "abg/storage/bucket_file.h"
#include "tests/fuzz/fuzz_input.h"

using namespace abg;

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  if (!fuzz::seeds_dir()) return 0;
  int n = 0;
  for (std::uint32_t width : {4u, 8u})
    for (bool weights : {false, true}) {
      auto path = fuzz::scratch() / "seed.bin";
      storage::bucket_layout layout;
      layout.id_width = width;
      layout.has_weights = weights;
      layout.edge_count = 9;
      auto w = storage::bucket_writer::create(path, storage::dataset_id::random(), layout, 4);
      if (!w) std::abort();
      for (std::uint64_t i = 0; i < 9; ++i)
        if (!w->append(i, (i * 7) % 5, i % 3, 0.5f + static_cast<float>(i))) std::abort();
      if (!w->commit()) std::abort();
      // Seeds carry the mode byte the target strips: 1 (reseal).
      fuzz::write_seed("bucket" + std::to_string(n++), "\x01" + fuzz::read_all(path));
    }
  std::exit(0);
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  std::string file(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] & 1) fuzz::seal(file, storage::bucket_header_size, 48, 56);
  static const auto path = fuzz::scratch() / "bucket.bin";
  fuzz::write_file(path, file);
  auto r = storage::bucket_reader::open(path);
  if (!r) return 0;
  volatile double sink = 0; // keeps the reads
  for (std::uint64_t i = 0; i < r->size(); ++i)
    sink = sink + static_cast<double>(r->lhs(i) + r->rhs(i) + r->rel(i)) + r->weight(i);
  return 0;
}
