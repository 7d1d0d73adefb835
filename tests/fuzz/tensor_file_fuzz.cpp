// Tensor files (checkpoint tables and shared parameters): header, rank,
// shape, payload size and checksums validated before the payload is read.
// An odd first byte reseals the checksums; the dataset id the reader expects
// is the file's own, so inputs get past that check too.
#include <cstdlib>
#include <cstring>
#include <vector>

#include "abg/storage/tensor_file.h"
#include "tests/fuzz/fuzz_input.h"

using namespace abg;

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  if (!fuzz::seeds_dir()) return 0;
  const std::vector<std::vector<std::int64_t>> shapes{{0}, {5}, {3, 4}, {2, 0}, {2, 2, 2}};
  int n = 0;
  for (const auto& shape : shapes) {
    std::vector<float> values(static_cast<std::size_t>(storage::element_count(shape)));
    for (std::size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i) * 0.25f;
    auto path = fuzz::scratch() / "seed.abgt";
    if (!storage::write_tensor_file(path, storage::dataset_id::random(), shape, values)) std::abort();
    fuzz::write_seed("tensor" + std::to_string(n++), "\x01" + fuzz::read_all(path));
  }
  std::exit(0);
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  std::string file(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] & 1) fuzz::seal(file, storage::tensor_header_size, 112, 120);
  static const auto path = fuzz::scratch() / "tensor.abgt";
  fuzz::write_file(path, file);
  storage::dataset_id id;
  if (file.size() >= 32) std::memcpy(id.bytes.data(), file.data() + 16, 16);
  (void)storage::read_tensor_file(path, id);
  return 0;
}
