// Tensor frames (Cap'n Proto), how every tensor inside a CAF message between
// nodes travels: a sequence of frames, each prefixed here by its length in
// words (2 bytes), fed to the assembler as they would arrive. A tensor that
// assembles must have as many values as its shape says.
#include <cstdlib>

#include "messages/tensor_codec.h"
#include "tests/fuzz/fuzz_input.h"

using namespace abg;

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  if (!fuzz::seeds_dir()) return 0;
  const std::vector<std::vector<std::int64_t>> shapes{{0}, {3}, {4, 5}, {2, 2, 3}};
  int n = 0;
  for (const auto& shape : shapes) {
    std::size_t count = 1;
    for (auto d : shape) count *= static_cast<std::size_t>(d);
    std::vector<float> values(count, 1.5f);
    auto frames = msg::encode_tensor(msg::tensor::make(shape, values), 16); // several frames
    if (!frames) std::abort();
    std::string seed;
    for (const auto& f : *frames) {
      auto words = static_cast<std::uint16_t>(f.size() / 8);
      seed.append(reinterpret_cast<const char*>(&words), 2);
      seed.append(reinterpret_cast<const char*>(f.data()), f.size());
    }
    fuzz::write_seed("tensor" + std::to_string(n++), seed);
  }
  std::exit(0);
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  msg::tensor_assembler a;
  std::size_t at = 0;
  while (at + 2 <= size) {
    std::size_t words = data[at] | (std::size_t{data[at + 1]} << 8);
    at += 2;
    std::size_t bytes = std::min(words * 8, size - at);
    auto r = a.add({data + at, bytes});
    at += bytes;
    if (!r) return 0;
    if (*r) {
      auto t = a.take();
      std::size_t expect = 1;
      for (auto d : t.shape) expect *= static_cast<std::size_t>(d);
      if (t.numel() != expect) std::abort();
      return 0;
    }
  }
  return 0;
}
