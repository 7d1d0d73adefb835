// Tensor files and checkpoints: round trips, and every kind of bad file
// (truncated, bit-flipped, wrong version, foreign dataset) refused by name.
#include <cmath>
#include <fstream>
#include <limits>

#include <doctest/doctest.h>

#include "abg/storage/checkpoint.h"
#include "abg/storage/tensor_file.h"
#include "tests/test_util.h"

namespace fs = std::filesystem;
using namespace abg::storage;
using abg::test::ramp;
using abg::test::scratch_dir;

namespace {

void flip_bit(const fs::path& path, std::uint64_t offset) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(static_cast<std::streamoff>(offset));
  char c = 0;
  f.get(c);
  f.seekp(static_cast<std::streamoff>(offset));
  f.put(static_cast<char>(c ^ 0x10));
}

void patch_u32(const fs::path& path, std::uint64_t offset, std::uint32_t value) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekp(static_cast<std::streamoff>(offset));
  f.write(reinterpret_cast<const char*>(&value), 4);
}

template <class T>
std::string error_of(const abg::expected<T>& result) {
  REQUIRE_FALSE(result.has_value());
  return result.error().message;
}

checkpoint_settings settings_for(const dataset_id& id, std::int64_t keep = 2) {
  checkpoint_settings s;
  s.dataset = id;
  s.schema = {{"entities", nlohmann::json::array()}};
  s.config_toml = "dimension = 4\n";
  s.keep_versions = keep;
  return s;
}

// Commits version v with one table whose values depend on v.
void commit_version(const fs::path& root, std::int64_t v, checkpoint_settings s,
                    checkpoint_position at = {}) {
  auto w = checkpoint_writer::begin(root, v, std::move(s));
  REQUIRE(w);
  auto data = ramp(12, static_cast<float>(v));
  REQUIRE(w->put_embeddings("user", 0, data, 3, 4));
  REQUIRE(w->commit(at));
}

} // namespace

TEST_CASE("tensor file: round trip, 64-byte aligned payload") {
  scratch_dir dir;
  auto id = dataset_id::random();
  auto data = ramp(15, 1.0f);
  std::int64_t shape[] = {3, 5};
  auto path = dir / "t.abgt";
  auto sum = write_tensor_file(path, id, shape, data);
  REQUIRE(sum);
  CHECK(fs::file_size(path) == tensor_header_size + 15 * 4);
  CHECK(tensor_header_size % 64 == 0);
  auto t = read_tensor_file(path, id);
  REQUIRE(t);
  CHECK(t->shape == std::vector<std::int64_t>{3, 5});
  CHECK(t->data == data);
  auto h = read_tensor_header(path, id);
  REQUIRE(h);
  CHECK(h->payload_checksum == *sum);

  std::int64_t scalar_shape[] = {0, 7};
  REQUIRE(write_tensor_file(dir / "empty.abgt", id, scalar_shape, {}));
  auto empty = read_tensor_file(dir / "empty.abgt", id);
  REQUIRE(empty);
  CHECK(empty->shape == std::vector<std::int64_t>{0, 7});
  CHECK(error_of(write_tensor_file(dir / "bad.abgt", id, shape, std::span(data).first(14))).find("15") !=
        std::string::npos);
}

TEST_CASE("tensor file: written in pieces is the file written whole; mapped, it is verified") {
  scratch_dir dir;
  auto id = dataset_id::random();
  auto data = ramp(15, 2.0f);
  std::int64_t shape[] = {3, 5};
  auto whole = write_tensor_file(dir / "whole.abgt", id, shape, data);
  REQUIRE(whole);
  auto w = tensor_file_writer::create(dir / "pieces.abgt", id, shape);
  REQUIRE(w);
  REQUIRE(w->append(std::span(data).first(4)));
  REQUIRE(w->append(std::span(data).subspan(4, 7)));
  CHECK(error_of(w->commit()).find("holds 15 values but 11 were written") != std::string::npos);
  CHECK_FALSE(fs::exists(dir / "pieces.abgt"));
  REQUIRE(w->append(std::span(data).subspan(11)));
  CHECK(error_of(w->append(std::span(data).first(1))).find("1 more values than its shape holds") != std::string::npos);
  auto sum = w->commit({.sync_directory = false, .sync_file = false});
  REQUIRE(sum);
  CHECK(*sum == *whole);
  auto a = abg::storage::read_file(dir / "whole.abgt");
  auto b = abg::storage::read_file(dir / "pieces.abgt");
  REQUIRE(a);
  REQUIRE(b);
  CHECK(*a == *b);

  auto m = map_tensor_file(dir / "pieces.abgt", id);
  REQUIRE(m);
  CHECK(m->shape == std::vector<std::int64_t>{3, 5});
  CHECK(m->payload_checksum == *whole);
  CHECK(std::vector<float>(m->values.begin(), m->values.end()) == data);
  flip_bit(dir / "pieces.abgt", tensor_header_size + 9);
  CHECK(error_of(map_tensor_file(dir / "pieces.abgt", id)).find("checksum mismatch") != std::string::npos);
  // A writer dropped before its commit leaves nothing behind.
  {
    auto dropped = tensor_file_writer::create(dir / "dropped.abgt", id, shape);
    REQUIRE(dropped);
    REQUIRE(dropped->append(data));
  }
  CHECK(std::distance(fs::directory_iterator(dir.path()), fs::directory_iterator()) == 2);
}

TEST_CASE("tensor file: bad files are refused with a message naming the file and the fault") {
  scratch_dir dir;
  auto id = dataset_id::random();
  auto data = ramp(15, 1.0f);
  std::int64_t shape[] = {3, 5};
  auto path = dir / "t.abgt";
  REQUIRE(write_tensor_file(path, id, shape, data));
  auto expect = [&](std::string_view part) {
    auto message = error_of(read_tensor_file(path, id));
    CHECK_MESSAGE(message.find(path.string()) != std::string::npos, message);
    CHECK_MESSAGE(message.find(part) != std::string::npos, message);
  };

  SUBCASE("truncated payload") {
    fs::resize_file(path, 180);
    expect("truncated: expected 188 bytes, found 180");
  }
  SUBCASE("truncated header") {
    fs::resize_file(path, 50);
    expect("truncated: expected at least 128 bytes (the header), found 50");
  }
  SUBCASE("trailing bytes") {
    fs::resize_file(path, 200);
    expect("expected 188 bytes, found 200");
  }
  SUBCASE("bit flip in the payload") {
    flip_bit(path, 150);
    expect("checksum mismatch: file is corrupt");
  }
  SUBCASE("bit flip in the header") {
    flip_bit(path, 41); // shape[0]
    expect("header checksum mismatch: file is corrupt");
  }
  SUBCASE("wrong version") {
    patch_u32(path, 8, 7);
    expect("format version 7 is not supported (this abg reads version 1)");
  }
  SUBCASE("not a tensor file") {
    abg::test::write_text(path, "hello, world, this is not a tensor file at all");
    expect("not an abg tensor file");
  }
  SUBCASE("foreign dataset") {
    auto other = dataset_id::random();
    auto message = error_of(read_tensor_file(path, other));
    CHECK(message.find(fmt::format("made from dataset {} but this entity path is dataset {}", id.hex(),
                                   other.hex())) != std::string::npos);
  }
  SUBCASE("missing") {
    fs::remove(path);
    expect("cannot open");
  }
}

TEST_CASE("shared parameter names") {
  CHECK(global_embedding_name("user") == "global_emb.user");
  CHECK(relation_param_name(3, "rhs", "linear_transformation") == "relations.3.rhs.linear_transformation");
  CHECK(optimizer_state_name("relations.3.rhs.real") == "optim.relations.3.rhs.real");
  auto key = parse_relation_param_name("relations.12.lhs.imag");
  REQUIRE(key);
  CHECK(key->relation == 12);
  CHECK(key->side == "lhs");
  CHECK(key->param == "imag");
  CHECK_FALSE(parse_relation_param_name("optim.relations.1.rhs.real"));
  CHECK_FALSE(parse_relation_param_name("relations.x.rhs.real"));
  CHECK_FALSE(parse_relation_param_name("relations.1.mid.real"));
  CHECK_FALSE(parse_relation_param_name("relations.1.rhs."));
  CHECK(file_safe_name("a b/c%") == "a%20b%2Fc%25");
}

TEST_CASE("checkpoint: write and read back a version") {
  scratch_dir dir;
  auto root = dir / "model";
  auto id = dataset_id::random();
  abg::config c;
  c.dimension = 4;
  c.entities = {{"user", {.num_partitions = 2}}, {"item", {.num_partitions = 1, .dimension = 3}}};
  c.relations = {{.name = "likes", .lhs = "user", .rhs = "item", .operator_ = "diagonal"}};
  auto settings = checkpoint_settings::from(c, id, "dimension = 4\n# the config\n");
  CHECK(settings.keep_versions == c.checkpoint_keep_versions);

  auto w = checkpoint_writer::begin(root, 1, settings);
  REQUIRE(w);
  auto u0 = ramp(5 * 4, 0.5f), u1 = ramp(2 * 4, -7.0f), i0 = ramp(6 * 3, 3.0f);
  auto o0 = ramp(5, 0.0f), o1 = ramp(2, 9.0f);
  REQUIRE(w->put_embeddings("user", 0, u0, 5, 4));
  REQUIRE(w->put_optimizer("user", 0, o0));
  REQUIRE(w->put_embeddings("user", 1, u1, 2, 4));
  REQUIRE(w->put_optimizer("user", 1, o1));
  REQUIRE(w->put_embeddings("item", 0, i0, 6, 3));
  auto diag = ramp(3, 1.0f), glob = ramp(4, 0.1f);
  REQUIRE(w->put_shared(relation_param_name(0, "rhs", "diagonal"), {3}, diag));
  REQUIRE(w->put_shared(optimizer_state_name(relation_param_name(0, "rhs", "diagonal")), {3}, ramp(3, 2.0f)));
  REQUIRE(w->put_shared(global_embedding_name("user"), {4}, glob));
  CHECK(error_of(w->put_embeddings("user", 0, u0, 5, 4)).find("twice") != std::string::npos);
  CHECK(error_of(w->put_optimizer("user", 0, o0)).find("twice") != std::string::npos);
  CHECK(error_of(w->put_optimizer("ghost", 0, o0)).find("put its embeddings first") != std::string::npos);
  CHECK(error_of(w->put_embeddings("user", 2, u0, 4, 4)).find("do not form [4, 4]") != std::string::npos);
  CHECK(error_of(w->put_shared(global_embedding_name("user"), {4}, glob)).find("twice") != std::string::npos);
  checkpoint_position at{2, 1, 3, true};
  auto committed = w->commit(at, {{"loss", 0.25}, {"edges", 1000}});
  REQUIRE(committed);
  CHECK(error_of(w->put_embeddings("user", 9, u0, 5, 4)).find("already committed") != std::string::npos);
  CHECK(fs::exists(root / "v1" / "manifest.json"));
  CHECK(committed_checkpoint_versions(root) == std::vector<std::int64_t>{1});

  auto r = checkpoint_reader::open(root, id);
  REQUIRE(r);
  CHECK(r->version() == 1);
  CHECK(r->manifest().position == at);
  CHECK(r->manifest().stats["edges"] == 1000);
  CHECK(r->manifest().stats["loss"] == 0.25);
  CHECK(r->check_schema(checkpoint_schema(c)));
  auto e = r->embeddings("user", 0);
  REQUIRE(e);
  CHECK(e->shape == std::vector<std::int64_t>{5, 4});
  CHECK(e->data == u0);
  std::vector<float> into(8);
  REQUIRE(r->embeddings_into("user", 1, into));
  CHECK(into == u1);
  CHECK(r->embeddings("item", 0)->data == i0);
  CHECK(r->optimizer("user", 0)->data == o0);
  CHECK(r->optimizer("user", 1)->data == o1);
  CHECK(error_of(r->optimizer("item", 0)).find("no optimizer state") != std::string::npos);
  CHECK(error_of(r->embeddings("item", 1)).find("no embeddings for entity type 'item' partition 1") !=
        std::string::npos);
  CHECK(error_of(r->embeddings_into("user", 1, std::span(into).first(7))).find("expects 7") != std::string::npos);
  auto shared = r->shared();
  REQUIRE(shared);
  REQUIRE(shared->entries.size() == 3);
  CHECK(shared->entries[0].name == "relations.0.rhs.diagonal");
  auto g = shared->find("global_emb.user");
  REQUIRE(g);
  CHECK(g->shape == std::vector<std::int64_t>{4});
  CHECK(std::vector<float>(shared->values(*g).begin(), shared->values(*g).end()) == glob);
  CHECK(*r->config_toml() == "dimension = 4\n# the config\n");

  // Schema changes that matter are named; training settings are not part of it.
  auto other = c;
  other.lr = 0.5;
  other.edge_paths = {"elsewhere"};
  CHECK(r->check_schema(checkpoint_schema(other)));
  other.entities[0].second.num_partitions = 4;
  auto message = error_of(r->check_schema(checkpoint_schema(other)));
  CHECK(message.find("entity type 'user': num_partitions was 2, now 4") != std::string::npos);

  CHECK(error_of(checkpoint_writer::begin(root, 1, settings)).find("already committed") != std::string::npos);
  CHECK(error_of(checkpoint_writer::begin(root, 0, settings)).find("start at 1") != std::string::npos);
}

// entity_optimizer = "adagrad": a table's state is [rows, dim]; the manifest
// says so, and a reader gives it in that shape.
TEST_CASE("checkpoint: element-wise optimizer state round-trips; a state of another size is refused") {
  scratch_dir dir;
  auto root = dir / "model";
  auto id = dataset_id::random();
  auto w = checkpoint_writer::begin(root, 1, settings_for(id));
  REQUIRE(w);
  auto e0 = ramp(5 * 4, 0.5f), e1 = ramp(2 * 4, 1.0f);
  auto s0 = ramp(5 * 4, 2.0f), s1 = ramp(2, 3.0f);
  REQUIRE(w->put_embeddings("user", 0, e0, 5, 4));
  CHECK(error_of(w->put_optimizer("user", 0, ramp(7, 0.0f))).find("7 values for 5 rows of dimension 4") !=
        std::string::npos);
  REQUIRE(w->put_optimizer("user", 0, s0));
  REQUIRE(w->put_embeddings("user", 1, e1, 2, 4));
  REQUIRE(w->put_optimizer("user", 1, s1));
  REQUIRE(w->commit({}));
  auto r = checkpoint_reader::open(root, id);
  REQUIRE(r);
  CHECK(r->manifest().table("user", 0)->state_width == 4);
  CHECK(r->manifest().table("user", 1)->state_width == 1);
  auto got = r->optimizer("user", 0);
  REQUIRE(got);
  CHECK(got->shape == std::vector<std::int64_t>{5, 4});
  CHECK(got->data == s0);
  CHECK(r->optimizer("user", 1)->shape == std::vector<std::int64_t>{2});
  CHECK(r->optimizer("user", 1)->data == s1);
}

TEST_CASE("checkpoint: a crash before the commit leaves the previous version in force") {
  scratch_dir dir;
  auto root = dir / "model";
  auto id = dataset_id::random();
  commit_version(root, 1, settings_for(id));
  {
    auto w = checkpoint_writer::begin(root, 2, settings_for(id));
    REQUIRE(w);
    auto data = ramp(12, 2.0f);
    REQUIRE(w->put_embeddings("user", 0, data, 3, 4));
    // the writer dies here: files written, no manifest
  }
  CHECK(fs::exists(root / "tables" / "embeddings_user_0.v2.abgt"));
  CHECK(committed_checkpoint_versions(root) == std::vector<std::int64_t>{1});
  auto r = checkpoint_reader::open(root, id);
  REQUIRE(r);
  CHECK(r->version() == 1);
  CHECK(r->embeddings("user", 0)->data == ramp(12, 1.0f));
  CHECK(error_of(checkpoint_reader::open(root, id, 2)).find("was never committed") != std::string::npos);
  CHECK(error_of(checkpoint_reader::open(root, id, 7)).find("committed versions: 1") != std::string::npos);

  // A manifest cut short (or otherwise corrupt) does not commit either.
  commit_version(root, 2, settings_for(id, 5));
  commit_version(root, 3, settings_for(id, 5));
  fs::resize_file(root / "v3" / "manifest.json", 40);
  r = checkpoint_reader::open(root, id);
  REQUIRE(r);
  CHECK(r->version() == 2);
  CHECK(r->embeddings("user", 0)->data == ramp(12, 2.0f));
  CHECK(error_of(checkpoint_reader::open(root, id, 3)).find("manifest is corrupt") != std::string::npos);
}

TEST_CASE("checkpoint: old versions are pruned, preserved ones kept") {
  scratch_dir dir;
  auto root = dir / "model";
  auto id = dataset_id::random();
  SUBCASE("keep_versions") {
    for (std::int64_t v = 1; v <= 5; ++v)
      commit_version(root, v, settings_for(id, 2));
    CHECK(committed_checkpoint_versions(root) == std::vector<std::int64_t>{4, 5});
    CHECK_FALSE(fs::exists(root / "v3"));
  }
  SUBCASE("checkpoint_preservation_interval") {
    auto s = settings_for(id, 1);
    s.preservation_interval = 2;
    // Two (path, chunk) iterations per epoch: versions 2, 4, 6, ... end epochs 0, 1, 2, ...
    for (std::int64_t v = 1; v <= 8; ++v)
      commit_version(root, v, s, {.epoch = (v - 1) / 2, .edge_chunk = (v - 1) % 2, .epoch_complete = v % 2 == 0});
    // Epochs 1 and 3 ((epoch + 1) % 2 == 0) end at versions 4 and 8.
    CHECK(committed_checkpoint_versions(root) == std::vector<std::int64_t>{4, 8});
    CHECK(read_checkpoint_manifest(root / "v4")->preserved);
  }
  SUBCASE("uncommitted leftovers are cleaned up") {
    commit_version(root, 1, settings_for(id, 1));
    fs::create_directories(root / "v2");
    abg::test::write_text(root / "v2" / "shared.abgt", "partial");
    abg::test::write_text(root / "tables" / "embeddings_user_0.v2.abgt", "partial");
    commit_version(root, 3, settings_for(id, 1));
    CHECK_FALSE(fs::exists(root / "v2"));
    CHECK_FALSE(fs::exists(root / "v1"));
    // The tables folder holds what version 3 refers to, and nothing else.
    std::vector<std::string> left;
    for (auto& e : fs::directory_iterator(root / "tables"))
      left.push_back(e.path().filename().string());
    CHECK(left == std::vector<std::string>{"embeddings_user_0.v3.abgt"});
  }
}

// A partition gathered from another node arrives in chunks that split rows
// and cross from the embeddings into the optimizer state anywhere; its files
// are those of the table put whole.
TEST_CASE("checkpoint: a table streamed in pieces is the table put whole") {
  scratch_dir dir;
  auto root = dir / "model";
  auto id = dataset_id::random();
  auto e0 = ramp(5 * 4, 0.5f), s0 = ramp(5 * 4, 2.0f), e1 = ramp(3 * 4, -1.0f), s1 = ramp(3, 7.0f);
  auto whole = checkpoint_writer::begin(root / "whole", 1, settings_for(id));
  REQUIRE(whole);
  REQUIRE(whole->put_embeddings("user", 0, e0, 5, 4));
  REQUIRE(whole->put_optimizer("user", 0, s0));
  REQUIRE(whole->put_embeddings("user", 1, e1, 3, 4));
  REQUIRE(whole->put_optimizer("user", 1, s1));
  auto put_whole = whole->commit({});
  REQUIRE(put_whole);

  auto w = checkpoint_writer::begin(root / "streamed", 1, settings_for(id));
  REQUIRE(w);
  // Both tables in pieces of 7 values: rows split, one piece spans both tensors.
  auto stream = [&](std::int64_t part, const std::vector<float>& e, const std::vector<float>& s, std::int64_t rows,
                    std::int64_t width) {
    auto t = w->begin_table("user", part, rows, 4, width);
    REQUIRE(t);
    auto all = e;
    all.insert(all.end(), s.begin(), s.end());
    for (std::size_t at = 0; at < all.size(); at += 7)
      REQUIRE(w->append_table(*t, std::span<const float>(all).subspan(at, std::min<std::size_t>(7, all.size() - at))));
    CHECK(error_of(w->append_table(*t, ramp(1, 0.0f))).find("1 values more than") != std::string::npos);
    REQUIRE(w->put_table(std::move(*t)));
  };
  stream(0, e0, s0, 5, 4);
  stream(1, e1, s1, 3, 1);
  CHECK(error_of(w->begin_table("user", 1, 3, 4, 1)).find("given twice") != std::string::npos);
  CHECK(error_of(w->begin_table("user", 2, 3, 4, 2)).find("1 or the dimension per row") != std::string::npos);
  {
    // Unfinished: refused, and dropped without a trace.
    auto t = w->begin_table("user", 2, 3, 4, 1);
    REQUIRE(t);
    REQUIRE(w->append_table(*t, ramp(12, 0.0f)));
    CHECK(error_of(w->put_table(std::move(*t))).find("12 of its 15 values were given") != std::string::npos);
  }
  auto streamed = w->commit({});
  REQUIRE(streamed);
  CHECK(streamed->tables.size() == 2);
  REQUIRE(streamed->files.size() == put_whole->files.size());
  for (std::size_t i = 0; i < put_whole->files.size(); ++i) {
    CAPTURE(put_whole->files[i].name);
    CHECK(streamed->files[i].name == put_whole->files[i].name);
    CHECK(streamed->files[i].bytes == put_whole->files[i].bytes);
    CHECK(streamed->files[i].checksum == put_whole->files[i].checksum);
  }
  std::size_t files = 0;
  for (auto& f : fs::directory_iterator(root / "streamed" / "tables")) {
    CAPTURE(f.path());
    CHECK(streamed->file("tables/" + f.path().filename().string()) != nullptr);
    ++files;
  }
  CHECK(files == 4);
  auto r = checkpoint_reader::open(root / "streamed", id);
  REQUIRE(r);
  CHECK(r->embeddings("user", 0)->data == e0);
  CHECK(r->optimizer("user", 0)->shape == std::vector<std::int64_t>{5, 4});
  CHECK(r->optimizer("user", 0)->data == s0);
  CHECK(r->manifest().table("user", 1)->state_width == 1);
  CHECK(r->optimizer("user", 1)->data == s1);
}

TEST_CASE("checkpoint: NaN and Inf are never committed") {
  scratch_dir dir;
  auto root = dir / "model";
  auto id = dataset_id::random();
  commit_version(root, 1, settings_for(id));
  auto w = checkpoint_writer::begin(root, 2, settings_for(id));
  REQUIRE(w);
  auto data = ramp(12, 0.0f);
  SUBCASE("embeddings") {
    data[6] = std::numeric_limits<float>::quiet_NaN();
    auto message = error_of(w->put_embeddings("user", 0, data, 3, 4));
    CHECK(message.find("entity type 'user' partition 0 holds nan at row 1, column 2") != std::string::npos);
  }
  SUBCASE("a streamed table: the place counts from the table's start") {
    data[9] = std::numeric_limits<float>::infinity();
    auto t = w->begin_table("user", 0, 3, 4, 1);
    REQUIRE(t);
    REQUIRE(w->append_table(*t, std::span<const float>(data).first(5)));
    auto message = error_of(w->append_table(*t, std::span<const float>(data).subspan(5)));
    CHECK(message.find("embeddings of entity type 'user' partition 0 holds inf at row 2, column 1") !=
          std::string::npos);
  }
  SUBCASE("shared") {
    REQUIRE(w->put_embeddings("user", 0, data, 3, 4));
    auto bad = ramp(4, 0.0f);
    bad[3] = std::numeric_limits<float>::infinity();
    auto message = error_of(w->put_shared("global_emb.user", {4}, bad));
    CHECK(message.find("shared tensor 'global_emb.user' holds inf at element 3") != std::string::npos);
  }
  auto message = error_of(w->commit({}));
  CHECK(message.find("refusing to commit checkpoint version 2") != std::string::npos);
  CHECK_FALSE(fs::exists(root / "v2" / "manifest.json"));
  CHECK(checkpoint_reader::open(root, id)->version() == 1);
}

TEST_CASE("checkpoint: damaged and foreign versions are refused with clear messages") {
  scratch_dir dir;
  auto root = dir / "model";
  auto id = dataset_id::random();
  commit_version(root, 1, settings_for(id, 5));
  commit_version(root, 2, settings_for(id, 5));
  auto file = root / "tables" / "embeddings_user_0.v2.abgt";
  SUBCASE("foreign dataset") {
    auto other = dataset_id::random();
    auto message = error_of(checkpoint_reader::open(root, other));
    CHECK(message.find(fmt::format("made from dataset {} but this entity path is dataset {}", id.hex(),
                                   other.hex())) != std::string::npos);
  }
  SUBCASE("truncated table") {
    fs::resize_file(file, 100);
    auto message = error_of(checkpoint_reader::open(root, id));
    CHECK(message.find(file.string() + ": truncated: expected 176 bytes, found 100") != std::string::npos);
  }
  SUBCASE("missing table") {
    fs::remove(file);
    CHECK(error_of(checkpoint_reader::open(root, id)).find("is incomplete: tables/embeddings_user_0.v2.abgt is missing") !=
          std::string::npos);
  }
  SUBCASE("bit flip") {
    flip_bit(file, 140);
    auto r = checkpoint_reader::open(root, id);
    REQUIRE(r);
    CHECK(error_of(r->embeddings("user", 0)).find("checksum mismatch: file is corrupt") != std::string::npos);
  }
  SUBCASE("a file from another version") {
    fs::copy_file(root / "tables" / "embeddings_user_0.v1.abgt", file, fs::copy_options::overwrite_existing);
    auto r = checkpoint_reader::open(root, id);
    REQUIRE(r);
    CHECK(error_of(r->embeddings("user", 0)).find("checksum differs from the manifest of version 2") !=
          std::string::npos);
  }
  SUBCASE("manifest of a future format") {
    auto manifest = root / "v2" / "manifest.json";
    auto doc = nlohmann::json::parse(*read_file(manifest));
    doc["format_version"] = 7;
    abg::test::write_text(manifest, doc.dump());
    CHECK(error_of(checkpoint_reader::open(root, id, 2)).find("format version 7 is not supported (this abg reads versions 1 to 2)") !=
          std::string::npos);
  }
  SUBCASE("manifest edited") {
    auto manifest = root / "v2" / "manifest.json";
    auto doc = nlohmann::json::parse(*read_file(manifest));
    doc["tables"][0]["rows"] = 2;
    abg::test::write_text(manifest, doc.dump());
    CHECK(error_of(checkpoint_reader::open(root, id, 2)).find("checksum mismatch: file is corrupt") !=
          std::string::npos);
  }
  SUBCASE("no checkpoint") {
    CHECK(error_of(checkpoint_reader::open(dir / "nothing", id)).find("no committed checkpoint") != std::string::npos);
  }
}

TEST_CASE("checkpoint: a version keeps the tables that did not change, and they outlive the version that wrote them") {
  scratch_dir dir;
  auto root = dir / "model";
  auto id = dataset_id::random();
  auto put_user = [](checkpoint_writer& w, std::int64_t part, float start) {
    auto data = ramp(12, start);
    REQUIRE(w.put_embeddings("user", part, data, 3, 4));
    REQUIRE(w.put_optimizer("user", part, ramp(3, start)));
  };
  auto v1 = [&] {
    auto w = checkpoint_writer::begin(root, 1, settings_for(id, 1));
    REQUIRE(w);
    put_user(*w, 0, 1.0f);
    put_user(*w, 1, 10.0f);
    auto m = w->commit({});
    REQUIRE(m);
    return *m;
  }();
  auto w = checkpoint_writer::begin(root, 2, settings_for(id, 1));
  REQUIRE(w);
  put_user(*w, 0, 2.0f);                      // changed
  CHECK(*w->keep_table(v1, "user", 1));       // unchanged: not written again
  CHECK_FALSE(*w->keep_table(v1, "item", 0)); // v1 has no such table
  CHECK(error_of(w->keep_table(v1, "user", 0)).find("given twice") != std::string::npos);
  auto v2 = w->commit({});
  REQUIRE(v2);
  CHECK(v2->table("user", 1)->embeddings_file == "tables/embeddings_user_1.v1.abgt");
  CHECK(v2->table("user", 0)->embeddings_file == "tables/embeddings_user_0.v2.abgt");

  // keep_versions = 1: v1 is gone, the table file it wrote and v2 uses is not.
  CHECK(committed_checkpoint_versions(root) == std::vector<std::int64_t>{2});
  CHECK_FALSE(fs::exists(root / "v1"));
  CHECK_FALSE(fs::exists(root / "tables" / "embeddings_user_0.v1.abgt"));
  CHECK(fs::exists(root / "tables" / "embeddings_user_1.v1.abgt"));
  auto r = checkpoint_reader::open(root, id);
  REQUIRE(r);
  CHECK(r->version() == 2);
  CHECK(r->embeddings("user", 0)->data == ramp(12, 2.0f));
  CHECK(r->embeddings("user", 1)->data == ramp(12, 10.0f));
  CHECK(r->optimizer("user", 1)->data == ramp(3, 10.0f));

  // A table kept from a version whose file has gone is written instead.
  fs::remove(root / "tables" / "embeddings_user_1.v1.abgt");
  auto w3 = checkpoint_writer::begin(root, 3, settings_for(id, 1));
  REQUIRE(w3);
  CHECK_FALSE(*w3->keep_table(*v2, "user", 1));
}

TEST_CASE("checkpoint: a format 1 version (every file in its version directory) is still read") {
  scratch_dir dir;
  auto root = dir / "model";
  auto id = dataset_id::random();
  commit_version(root, 1, settings_for(id));
  // Rewrite it the way format 1 laid it out.
  auto v = root / "v1";
  fs::rename(root / "tables" / "embeddings_user_0.v1.abgt", v / "embeddings_user_0.abgt");
  auto doc = nlohmann::json::parse(*read_file(v / "manifest.json"));
  auto rewrite = [&] {
    doc.erase("manifest_checksum");
    doc["manifest_checksum"] = checksum_hex(checksum(doc.dump()));
    abg::test::write_text(v / "manifest.json", doc.dump(2));
  };
  doc["format_version"] = 1;
  doc["tables"][0]["embeddings"] = "embeddings_user_0.abgt";
  for (auto& f : doc["files"])
    if (f["name"] == "tables/embeddings_user_0.v1.abgt")
      f["name"] = "embeddings_user_0.abgt";
  rewrite();
  auto r = checkpoint_reader::open(root, id);
  REQUIRE_MESSAGE(r, (r ? std::string() : r.error().message));
  CHECK(r->embeddings("user", 0)->data == ramp(12, 1.0f));
  // A later version cannot refer to its files: they go with it.
  {
    auto w = checkpoint_writer::begin(root, 2, settings_for(id));
    REQUIRE(w);
    CHECK_FALSE(*w->keep_table(r->manifest(), "user", 0));
  }
  // A format 1 manifest naming a tables/ file is refused.
  doc["tables"][0]["embeddings"] = "tables/embeddings_user_0.abgt";
  for (auto& f : doc["files"])
    if (f["name"] == "embeddings_user_0.abgt")
      f["name"] = "tables/embeddings_user_0.abgt";
  rewrite();
  CHECK(error_of(checkpoint_reader::open(root, id, 1)).find("bad file entry") != std::string::npos);
}

TEST_CASE("checkpoint: tables that other nodes hold (checkpoint_mode = \"local\") are listed with their nodes") {
  scratch_dir dir;
  auto root = dir / "model";
  auto id = dataset_id::random();
  // Another node's partition server wrote user/1 into its own checkpoint path.
  auto elsewhere = dir / "other-node";
  auto emb_name = checkpoint_table_file("embeddings", "user", 1, 1), opt_name = checkpoint_table_file("optimizer", "user", 1, 1);
  CHECK(emb_name == "tables/embeddings_user_1.v1.abgt");
  std::int64_t emb_shape[] = {3, 4}, opt_shape[] = {3};
  fs::create_directories(elsewhere / "tables");
  auto emb_sum = write_tensor_file(elsewhere / emb_name, id, emb_shape, ramp(12, 5.0f));
  auto opt_sum = write_tensor_file(elsewhere / opt_name, id, opt_shape, ramp(3, 5.0f));
  REQUIRE(emb_sum);
  REQUIRE(opt_sum);
  checkpoint_file emb{emb_name, tensor_header_size + 48, *emb_sum, {"n1", "n0"}};
  checkpoint_file opt{opt_name, tensor_header_size + 12, *opt_sum, {"n1", "n0"}};

  auto w = checkpoint_writer::begin(root, 1, settings_for(id, 1));
  REQUIRE(w);
  auto data = ramp(12, 1.0f);
  REQUIRE(w->put_embeddings("user", 0, data, 3, 4));
  REQUIRE(w->put_server_table({"user", 1, 3, 4, "", ""}, emb, opt));
  CHECK(error_of(w->put_server_table({"user", 1, 3, 4, "", ""}, emb, opt)).find("given twice") != std::string::npos);
  auto v1 = w->commit({});
  REQUIRE(v1);

  // The manifest names the nodes; opening does not need their files here.
  auto m = read_checkpoint_manifest(root / "v1");
  REQUIRE(m);
  CHECK(m->file(emb_name)->nodes == std::vector<std::string>{"n1", "n0"});
  CHECK(m->file(m->table("user", 0)->embeddings_file)->nodes.empty());
  auto r = checkpoint_reader::open(root, id);
  REQUIRE_MESSAGE(r, (r ? std::string() : r.error().message));
  CHECK(r->embeddings("user", 0)->data == ramp(12, 1.0f));
  CHECK(error_of(r->embeddings("user", 1)).find("checkpoint_mode = \"local\" left it in the checkpoint_path of node(s) n1, n0") !=
        std::string::npos);
  // Where the files are reachable too (a filesystem every node shares), they read as any other.
  fs::create_directories(root / "tables");
  fs::copy_file(elsewhere / emb_name, root / emb_name);
  CHECK(r->embeddings("user", 1)->data == ramp(12, 5.0f));

  // The next version keeps the remote table as it is, without looking for its files here.
  fs::remove(root / emb_name);
  auto w2 = checkpoint_writer::begin(root, 2, settings_for(id, 1));
  REQUIRE(w2);
  CHECK(*w2->keep_table(*v1, "user", 1));
  REQUIRE(w2->put_embeddings("user", 0, data, 3, 4));
  REQUIRE(w2->commit({}));
  auto listed = listed_table_files(root);
  REQUIRE(listed);
  CHECK(listed->contains(emb_name));
  CHECK_FALSE(listed->contains("tables/embeddings_user_0.v1.abgt")); // v1 pruned (keep 1)

  // The other node prunes its folder by the coordinator's list.
  abg::test::write_text(elsewhere / "tables" / "embeddings_user_1.v0.abgt", "stale");
  prune_table_files(elsewhere, *listed);
  CHECK(fs::exists(elsewhere / emb_name));
  CHECK(fs::exists(elsewhere / opt_name));
  CHECK_FALSE(fs::exists(elsewhere / "tables" / "embeddings_user_1.v0.abgt"));
}
