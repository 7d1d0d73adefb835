// Entity dictionaries (the names of one entity type's partition): magic,
// version, checksums, dataset id, the count entities.json records and every
// offset validated, in place (entity_names_view) and copied out
// (read_entity_names). An odd first byte reseals the checksums; the meta the
// readers check against takes the file's own dataset id and count (or, with
// the second bit, one less: a longer file's prefix).
#include <cstdlib>
#include <cstring>
#include <vector>

#include "abg/storage/entity_names_view.h"
#include "abg/storage/entity_store.h"
#include "tests/fuzz/fuzz_input.h"

using namespace abg;

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  if (!fuzz::seeds_dir()) return 0;
  const std::vector<std::vector<std::string_view>> sets{{}, {"a"}, {"alpha", "", "gamma\tdelta", "日本"}};
  int n = 0;
  for (const auto& names : sets) {
    auto dir = fuzz::scratch() / "seed";
    std::filesystem::create_directories(dir);
    if (!storage::write_entity_names(dir, storage::dataset_id::random(), "node", 0, names)) std::abort();
    fuzz::write_seed("names" + std::to_string(n++),
                     "\x01" + fuzz::read_all(storage::entity_names_file(dir, "node", 0)));
  }
  std::exit(0);
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  std::string file(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] & 1) fuzz::seal(file, 64, 40, 48);
  static const auto dir = fuzz::scratch() / "entities";
  fuzz::write_file(storage::entity_names_file(dir, "node", 0), file);
  storage::entity_store_meta meta;
  std::int64_t count = 0;
  if (file.size() >= 40) {
    std::memcpy(meta.id.bytes.data(), file.data() + 16, 16);
    std::memcpy(&count, file.data() + 32, 8);
  }
  if ((data[0] & 2) && count > 0) --count;
  meta.types.push_back({"node", {count}});
  if (auto view = storage::entity_names_view::open(dir, meta, "node", 0)) {
    std::size_t total = 0;
    for (std::int64_t i = 0; i < view->size(); ++i) total += (*view)[i].size();
    if (total > file.size()) std::abort(); // names lie inside the file
  }
  (void)storage::read_entity_names(dir, meta, "node", 0);
  return 0;
}
