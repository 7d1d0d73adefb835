// Memory-mapped reads: entity names in place (lookup, the committed prefix,
// damage) and checkpoint tensors mapped with the same validation as
// checkpoint_reader's reads.
#include <fstream>

#include <doctest/doctest.h>
#include <fmt/format.h>

#include "abg/storage/checkpoint_map.h"
#include "abg/storage/entity_names_view.h"
#include "tests/test_util.h"

namespace fs = std::filesystem;
using namespace abg::storage;

namespace {

void flip_byte_at(const fs::path& path, std::uint64_t offset) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(static_cast<std::streamoff>(offset));
  char c = 0;
  f.get(c);
  f.seekp(static_cast<std::streamoff>(offset));
  f.put(static_cast<char>(c ^ 0x01));
}

template <class T>
std::string message_of(const abg::expected<T>& r) {
  REQUIRE_FALSE(r.has_value());
  return r.error().message;
}

} // namespace

TEST_CASE("entity names view: names in place, lookup, committed prefix, damage") {
  abg::test::scratch_dir dir;
  entity_store_meta meta;
  meta.id = dataset_id::random();
  meta.types.push_back({"node", {5, 0}});
  REQUIRE(write_entity_meta(dir.path(), meta));
  std::vector<std::string_view> names{"alpha", "", "beta", "alphabet", "tab\there", "unfinished"};
  REQUIRE(write_entity_names(dir.path(), meta.id, "node", 0, names));
  REQUIRE(write_entity_names(dir.path(), meta.id, "node", 1, {}));

  auto view = entity_names_view::open(dir.path(), meta, "node", 0);
  REQUIRE(view);
  CHECK(view->size() == 5); // entities.json's count: "unfinished" belongs to a later import
  for (std::int64_t i = 0; i < 5; ++i)
    CHECK((*view)[i] == names[static_cast<std::size_t>(i)]);
  CHECK(view->find("alpha") == 0);
  CHECK(view->find("") == 1);
  CHECK(view->find("alphabet") == 3);
  CHECK(view->find("tab\there") == 4);
  CHECK(view->find("alph") == -1);
  CHECK(view->find("unfinished") == -1);
  auto empty = entity_names_view::open(dir.path(), meta, "node", 1);
  REQUIRE(empty);
  CHECK(empty->size() == 0);
  CHECK(empty->find("alpha") == -1);

  // A view stays valid when an import replaces the file (a rename; the mapping keeps the old one).
  REQUIRE(write_entity_names(dir.path(), meta.id, "node", 0, {"x", "y", "z", "w", "v"}));
  CHECK((*view)[2] == "beta");
  CHECK(entity_names_view::open(dir.path(), meta, "node", 0)->find("z") == 2);

  CHECK(message_of(entity_names_view::open(dir.path(), meta, "user", 0)).find("entity type 'user'") !=
        std::string::npos);
  CHECK(message_of(entity_names_view::open(dir.path(), meta, "node", 2)).find("no partition 2") !=
        std::string::npos);
  auto file = entity_names_file(dir.path(), "node", 0);
  flip_byte_at(file, fs::file_size(file) - 1);
  CHECK(message_of(entity_names_view::open(dir.path(), meta, "node", 0)).find("checksum mismatch") !=
        std::string::npos);
  REQUIRE(write_entity_names(dir.path(), meta.id, "node", 0, {"alpha"}));
  CHECK(message_of(entity_names_view::open(dir.path(), meta, "node", 0)).find("truncated") != std::string::npos);
  fs::remove(file);
  CHECK(message_of(entity_names_view::open(dir.path(), meta, "node", 0)).find("cannot open") != std::string::npos);
}

TEST_CASE("checkpoint tensors mapped: the values the reader reads, the same refusals") {
  abg::test::scratch_dir dir;
  auto id = dataset_id::random();
  checkpoint_settings s;
  s.dataset = id;
  s.schema = {{"entities", nlohmann::json::array()}};
  s.config_toml = "dimension = 3\n";
  auto w = checkpoint_writer::begin(dir / "model", 1, s);
  REQUIRE(w);
  std::vector<float> p0(4 * 3), p1(2 * 3);
  for (std::size_t i = 0; i < p0.size(); ++i)
    p0[i] = 0.5f * static_cast<float>(i) - 1.0f;
  for (std::size_t i = 0; i < p1.size(); ++i)
    p1[i] = -0.25f * static_cast<float>(i);
  REQUIRE(w->put_embeddings("node", 0, p0, 4, 3));
  REQUIRE(w->put_embeddings("node", 1, p1, 2, 3));
  std::vector<float> g{1, 2, 3}, diag{4, 5, 6};
  REQUIRE(w->put_shared(global_embedding_name("node"), {3}, g));
  REQUIRE(w->put_shared(relation_param_name(0, "rhs", "diagonal"), {3}, diag));
  REQUIRE(w->commit({}));

  auto reader = checkpoint_reader::open(dir / "model", id);
  REQUIRE(reader);
  auto m0 = map_embeddings(*reader, "node", 0);
  auto m1 = map_embeddings(*reader, "node", 1);
  REQUIRE(m0);
  REQUIRE(m1);
  CHECK(m0->shape == std::vector<std::int64_t>{4, 3});
  CHECK(std::vector<float>(m0->values.begin(), m0->values.end()) == p0);
  CHECK(std::vector<float>(m1->values.begin(), m1->values.end()) == p1);
  CHECK(message_of(map_embeddings(*reader, "node", 2)).find("no embeddings for entity type 'node' partition 2") !=
        std::string::npos);

  auto shared = map_shared(*reader);
  REQUIRE(shared);
  auto* ge = shared->find(global_embedding_name("node"));
  REQUIRE(ge != nullptr);
  CHECK(std::vector<float>(shared->values(*ge).begin(), shared->values(*ge).end()) == g);
  auto* de = shared->find("relations.0.rhs.diagonal");
  REQUIRE(de != nullptr);
  CHECK(std::vector<float>(shared->values(*de).begin(), shared->values(*de).end()) == diag);
  CHECK(shared->find("relations.0.rhs.translation") == nullptr);

  // A flipped payload byte: the reader and the map refuse it alike.
  const auto& table = *reader->manifest().table("node", 1);
  auto path = reader->path_of(table.embeddings_file);
  flip_byte_at(path, fs::file_size(path) - 1);
  CHECK(message_of(reader->embeddings("node", 1)).find("checksum mismatch") != std::string::npos);
  CHECK(message_of(map_embeddings(*reader, "node", 1)).find("checksum mismatch") != std::string::npos);
  CHECK(map_embeddings(*reader, "node", 0)); // the other partition is intact
}
