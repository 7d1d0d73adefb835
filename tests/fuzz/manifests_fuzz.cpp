// The JSON files abg trusts to describe what is on disk: an entity path's
// entities.json, an edge path's manifest.json, and a checkpoint version's
// manifest.json, the last read by checkpoint_reader::open over a real
// checkpoint (its table, shared and config files) and then every table and
// shared tensor it lists is read. The first input byte picks the file (its
// low two bits) and, with bit 2, reseals the checkpoint manifest's own
// checksum so mutations get past it.
#include <cstdlib>
#include <vector>

#include <nlohmann/json.hpp>

#include "abg/storage/bucket_file.h"
#include "abg/storage/checkpoint.h"
#include "abg/storage/edge_manifest.h"
#include "abg/storage/entity_store.h"
#include "tests/fuzz/fuzz_input.h"

using namespace abg;
namespace fs = std::filesystem;

namespace {

const storage::dataset_id& dataset() {
  static const auto id = storage::dataset_id::random();
  return id;
}

// A committed checkpoint (version 1) with two tables and a shared tensor.
const fs::path& checkpoint() {
  static const fs::path path = [] {
    auto p = fuzz::scratch() / "checkpoint";
    storage::checkpoint_settings settings;
    settings.dataset = dataset();
    settings.config_toml = "dimension = 2\n";
    auto w = storage::checkpoint_writer::begin(p, 1, settings);
    fuzz::must(w, "checkpoint_writer::begin");
    std::vector<float> emb{1, 2, 3, 4, 5, 6}, state{0.5f, 0.25f, 0};
    for (std::int64_t part : {0, 1}) {
      fuzz::must(w->put_embeddings("node", part, emb, 3, 2), "put_embeddings");
      fuzz::must(w->put_optimizer("node", part, state), "put_optimizer");
    }
    fuzz::must(w->put_shared(storage::relation_param_name(0, "rhs", "diag"), {2}, std::vector<float>{1, -1}),
               "put_shared");
    fuzz::must(w->commit({}), "commit");
    return p;
  }();
  return path;
}

fs::path checkpoint_manifest() { return storage::checkpoint_version_dir(checkpoint(), 1) / "manifest.json"; }

void reseal(std::string& text) {
  auto doc = nlohmann::json::parse(text, nullptr, false);
  if (!doc.is_object()) return;
  doc.erase("manifest_checksum");
  doc["manifest_checksum"] = storage::checksum_hex(
    storage::checksum(doc.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)));
  text = doc.dump();
}

} // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  auto original = fuzz::read_all(checkpoint_manifest()); // made once per process
  if (!fuzz::seeds_dir()) return 0;
  auto dir = fuzz::scratch() / "seed";
  std::filesystem::create_directories(dir);
  storage::entity_store_meta meta;
  meta.id = dataset();
  meta.types = {{"node", {3, 3}}, {"item", {5}}};
  meta.relation_names = {"likes", "knows"};
  meta.dynamic_relations = true;
  fuzz::must(storage::write_entity_meta(dir, meta), "write_entity_meta");
  fuzz::write_seed("entities", std::string("\x00", 1) + fuzz::read_all(storage::entity_meta_file(dir)));
  storage::edge_manifest m;
  m.id = dataset();
  m.lhs_partitions = m.rhs_partitions = 2;
  m.entity_types = {{"node", {3, 3}}};
  m.num_relations = 2;
  m.sources = {"train.tsv"};
  m.buckets = {{0, 1, 7, storage::bucket_file_name(0, 1), 42}, {1, 1, 2, storage::bucket_file_name(1, 1), 7}};
  fuzz::must(storage::write_edge_manifest(dir, m), "write_edge_manifest");
  fuzz::write_seed("edges", "\x01" + fuzz::read_all(storage::edge_manifest_file(dir)));
  fuzz::write_seed("checkpoint", "\x06" + original);
  std::exit(0);
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  static const auto dir = [] {
    auto d = fuzz::scratch() / "manifests";
    std::filesystem::create_directories(d);
    return d;
  }();
  switch (data[0] & 3) {
  case 0:
    fuzz::write_file(storage::entity_meta_file(dir), text);
    (void)storage::read_entity_meta(dir);
    break;
  case 1:
    fuzz::write_file(storage::edge_manifest_file(dir), text);
    (void)storage::read_edge_manifest_for(dir, dataset(), "entities", 2, 2);
    break;
  default: {
    if (data[0] & 4) reseal(text);
    fuzz::write_file(checkpoint_manifest(), text);
    auto reader = storage::checkpoint_reader::open(checkpoint(), dataset(), 1);
    if (!reader) break;
    for (const auto& t : reader->manifest().tables) {
      (void)reader->embeddings(t.type, t.partition);
      (void)reader->optimizer(t.type, t.partition);
    }
    (void)reader->shared();
    (void)reader->config_toml();
  }
  }
  return 0;
}
