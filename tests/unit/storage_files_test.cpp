// Bucket files, entity names and edge manifests reject damaged and foreign
// files with messages that name the file and the problem.
#include <doctest/doctest.h>

#include <cstring>
#include <fstream>

#include "abg/storage/bucket_file.h"
#include "abg/storage/edge_manifest.h"
#include "abg/storage/entity_store.h"
#include "tests/test_util.h"

namespace fs = std::filesystem;
using namespace abg;
using namespace abg::storage;

namespace {

void flip_byte(const fs::path& file, std::uint64_t offset) {
  std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(static_cast<std::streamoff>(offset));
  char c;
  f.get(c);
  f.seekp(static_cast<std::streamoff>(offset));
  f.put(static_cast<char>(c ^ 0x10));
}

void truncate_by(const fs::path& file, std::uint64_t bytes) {
  fs::resize_file(file, fs::file_size(file) - bytes);
}

fs::path write_bucket(const fs::path& dir, const dataset_id& id, bool weights) {
  auto path = dir / bucket_file_name(0, 1);
  auto w = bucket_writer::create(path, id, {100, 4, weights}, 7); // small buffer: many flushes
  REQUIRE(w);
  for (std::uint64_t i = 0; i < 100; ++i)
    REQUIRE(w->append(i, 99 - i, i % 3, static_cast<float>(i) / 4));
  REQUIRE(w->commit());
  return path;
}

std::string message_of(const auto& result) {
  REQUIRE_FALSE(result);
  return result.error().message;
}

} // namespace

TEST_CASE("bucket file round trip") {
  abg::test::scratch_dir dir;
  auto id = dataset_id::random();
  for (bool weights : {false, true}) {
    auto path = write_bucket(dir.path(), id, weights);
    auto r = bucket_reader::open(path, &id);
    REQUIRE(r);
    CHECK(r->size() == 100);
    CHECK(r->layout().has_weights == weights);
    for (std::uint64_t i = 0; i < 100; ++i) {
      CHECK(r->lhs(i) == i);
      CHECK(r->rhs(i) == 99 - i);
      CHECK(r->rel(i) == i % 3);
      CHECK(r->weight(i) == (weights ? static_cast<float>(i) / 4 : 1.0f));
    }
  }
  CHECK_FALSE(fs::exists(temporary_path_for(dir / bucket_file_name(0, 1))));
}

TEST_CASE("damaged and foreign bucket files are rejected clearly") {
  abg::test::scratch_dir dir;
  auto id = dataset_id::random();
  auto path = write_bucket(dir.path(), id, true);
  auto pristine = *read_file(path);
  auto restore = [&] { abg::test::write_text(path, pristine); };

  truncate_by(path, 10);
  auto m = message_of(bucket_reader::open(path, &id));
  CHECK(m.find(path.string()) != std::string::npos);
  CHECK(m.find("truncated") != std::string::npos);

  restore();
  flip_byte(path, bucket_header_size + 17);
  CHECK(message_of(bucket_reader::open(path, &id)).find("payload checksum mismatch") != std::string::npos);

  restore();
  flip_byte(path, 24); // inside the edge count
  CHECK(message_of(bucket_reader::open(path, &id)).find("header checksum mismatch") != std::string::npos);

  restore();
  flip_byte(path, 8); // format version 1 -> 17
  CHECK(message_of(bucket_reader::open(path, &id)).find("format version 17") != std::string::npos);

  restore();
  flip_byte(path, 0);
  CHECK(message_of(bucket_reader::open(path, &id)).find("bad magic") != std::string::npos);

  restore();
  { // An edge count whose column sizes wrap round to the file's own size
    // (found by tests/fuzz/bucket_file_fuzz): refused before any column is read.
    std::string wrapped = pristine;
    std::uint64_t huge = (std::uint64_t{1} << 62) + 9;
    std::memcpy(wrapped.data() + 32, &huge, 8); // the edge count
    auto header = checksum(std::string_view(wrapped).substr(0, 56));
    std::memcpy(wrapped.data() + 56, &header, 8);
    abg::test::write_text(path, wrapped);
    auto why = message_of(bucket_reader::open(path, &id));
    CAPTURE(why);
    CHECK(why.find("cannot hold the 4611686018427387913 edges its header announces") != std::string::npos);
  }

  restore();
  auto other = dataset_id::random();
  auto foreign = message_of(bucket_reader::open(path, &other));
  CHECK(foreign.find("made from dataset " + id.hex()) != std::string::npos);
  CHECK(foreign.find(other.hex()) != std::string::npos);
}

TEST_CASE("entity names round trip and damage detection") {
  abg::test::scratch_dir dir;
  entity_store_meta meta;
  meta.id = dataset_id::random();
  meta.types.push_back({"node", {3, 0}});
  meta.relation_names = {"r"};
  REQUIRE(write_entity_meta(dir.path(), meta));
  std::vector<std::string_view> names{"alpha", "", "tab\there"};
  REQUIRE(write_entity_names(dir.path(), meta.id, "node", 0, names));
  REQUIRE(write_entity_names(dir.path(), meta.id, "node", 1, {}));
  auto back_meta = read_entity_meta(dir.path());
  REQUIRE(back_meta);
  CHECK(back_meta->id == meta.id);
  CHECK(back_meta->types[0].counts == std::vector<std::int64_t>{3, 0});
  auto back = read_entity_names(dir.path(), *back_meta, "node", 0);
  REQUIRE(back);
  CHECK(*back == std::vector<std::string>{"alpha", "", "tab\there"});
  CHECK(read_entity_names(dir.path(), *back_meta, "node", 1)->empty());

  // A longer file is an unfinished later import: its committed prefix is read.
  REQUIRE(write_entity_names(dir.path(), meta.id, "node", 0, {"alpha", "", "tab\there", "new"}));
  CHECK(read_entity_names(dir.path(), *back_meta, "node", 0)->size() == 3);

  auto file = entity_names_file(dir.path(), "node", 0);
  flip_byte(file, fs::file_size(file) - 2);
  CHECK(message_of(read_entity_names(dir.path(), *back_meta, "node", 0)).find("checksum mismatch") !=
        std::string::npos);
  REQUIRE(write_entity_names(dir.path(), meta.id, "node", 0, {"alpha"}));
  CHECK(message_of(read_entity_names(dir.path(), *back_meta, "node", 0)).find("truncated") != std::string::npos);
  REQUIRE(write_entity_names(dir.path(), dataset_id::random(), "node", 0, names));
  CHECK(message_of(read_entity_names(dir.path(), *back_meta, "node", 0)).find("belongs to dataset") !=
        std::string::npos);

  abg::test::write_text(dir / "entities.json", "{ not json");
  auto bad = message_of(read_entity_meta(dir.path()));
  CHECK(bad.find("entities.json is corrupt") != std::string::npos);
}

TEST_CASE("edge manifest round trip and validation") {
  abg::test::scratch_dir dir;
  edge_manifest m;
  m.id = dataset_id::random();
  m.lhs_partitions = 2;
  m.rhs_partitions = 2;
  m.entity_types.push_back({"node", {5, 4}});
  m.num_relations = 3;
  m.sources = {"/data/train.tsv"};
  m.buckets.push_back({1, 0, 42, bucket_file_name(1, 0), 0xdeadbeefULL});
  REQUIRE(write_edge_manifest(dir.path(), m));
  auto back = read_edge_manifest(dir.path());
  REQUIRE(back);
  CHECK(back->id == m.id);
  CHECK(back->total_edges() == 42);
  CHECK(back->buckets[0].checksum == 0xdeadbeefULL);
  CHECK(back->buckets[0].file == "edges_1_0.abgb");

  auto text = *read_file(edge_manifest_file(dir.path()));
  auto pos = text.find("\"lhs\": 1");
  REQUIRE(pos != std::string::npos);
  text.replace(pos, 8, "\"lhs\": 7");
  abg::test::write_text(edge_manifest_file(dir.path()), text);
  CHECK(message_of(read_edge_manifest(dir.path())).find("outside the 2x2 grid") != std::string::npos);
  CHECK(message_of(read_edge_manifest(dir / "missing")).find("has not been imported") != std::string::npos);
}
