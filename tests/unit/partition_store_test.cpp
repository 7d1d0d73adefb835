// The partition store: tables written whole or in pieces, replaced by newer
// versions, mapped back verified; a corrupt file refused by name; an earlier
// run's files removed at open and nothing else.
#include <fstream>

#include <doctest/doctest.h>

#include "abg/storage/partition_store.h"
#include "tests/test_util.h"

namespace fs = std::filesystem;
using namespace abg::storage;
using abg::test::scratch_dir;
using abg::test::ramp;

namespace {

std::size_t files_in(const fs::path& dir) {
  return static_cast<std::size_t>(std::distance(fs::directory_iterator(dir), fs::directory_iterator()));
}

std::uintmax_t bytes_in(const fs::path& dir) {
  std::uintmax_t total = 0;
  for (const auto& f : fs::directory_iterator(dir)) total += f.file_size();
  return total;
}

} // namespace

TEST_CASE("partition store: whole and in pieces, replaced, read back verified") {
  scratch_dir dir;
  auto id = dataset_id::random();
  auto store = partition_store::open(dir / "store", id);
  REQUIRE(store);
  auto& s = **store;
  const table_key user{"user", 3};
  auto emb = ramp(4 * 3, 1.0f);
  auto state = ramp(4, -2.0f);
  REQUIRE(s.store(user, 1, 4, 3, emb, state));
  auto got = s.read(user);
  REQUIRE(got);
  CHECK(got->info.version == 1);
  CHECK(got->info.rows == 4);
  CHECK(got->info.dim == 3);
  CHECK(std::vector<float>(got->embeddings.values.begin(), got->embeddings.values.end()) == emb);
  CHECK(std::vector<float>(got->state.values.begin(), got->state.values.end()) == state);
  CHECK(bytes_in(s.dir()) == 2 * tensor_header_size + 16 * sizeof(float));
  CHECK(files_in(s.dir()) == 2);

  // Version 2 in pieces: nothing changes until it is installed.
  auto emb2 = ramp(4 * 3, 10.0f);
  auto state2 = ramp(4, 20.0f);
  auto p = s.begin(user, 2, 4, 3);
  REQUIRE(p);
  REQUIRE(p->append(std::span(emb2).first(3), std::span(state2).first(1)));
  CHECK_FALSE(p->append(std::span(emb2).subspan(3, 2), std::span(state2).subspan(1, 1)));  // 2 values for a row of 3
  CHECK(s.find(user)->version == 1);
  REQUIRE(p->append(std::span(emb2).subspan(3), std::span(state2).subspan(1)));
  CHECK(p->rows_written() == 4);
  REQUIRE(s.install(std::move(*p)));
  CHECK(s.find(user)->version == 2);
  auto got2 = s.read(user);
  REQUIRE(got2);
  CHECK(std::vector<float>(got2->embeddings.values.begin(), got2->embeddings.values.end()) == emb2);
  // The replaced version's files are gone; the mapping taken before still reads them.
  CHECK(files_in(s.dir()) == 2);
  CHECK(std::vector<float>(got->embeddings.values.begin(), got->embeddings.values.end()) == emb);

  // An incomplete put is refused and leaves the table as it was.
  auto half = s.begin(user, 3, 4, 3);
  REQUIRE(half);
  REQUIRE(half->append(std::span(emb2).first(3), std::span(state2).first(1)));
  auto refused = s.install(std::move(*half));
  REQUIRE_FALSE(refused);
  CHECK(refused.error().message.find("1 of its 4 rows") != std::string::npos);
  CHECK(s.find(user)->version == 2);

  CHECK_FALSE(s.read({"user", 4}));
  CHECK(s.list().size() == 1);
  s.clear();
  CHECK(s.list().empty());
  CHECK(files_in(s.dir()) == 0);
}

// entity_optimizer = "adagrad": d optimizer values per row, in pieces too.
TEST_CASE("partition store: element-wise optimizer state") {
  scratch_dir dir;
  auto store = partition_store::open(dir / "store", dataset_id::random());
  REQUIRE(store);
  auto& s = **store;
  const table_key user{"user", 0};
  auto emb = ramp(4 * 3, 1.0f);
  auto state = ramp(4 * 3, -5.0f);
  CHECK_FALSE(s.begin(user, 1, 4, 3, 2));  // neither 1 nor the dimension
  auto p = s.begin(user, 1, 4, 3, 3);
  REQUIRE(p);
  REQUIRE(p->append(std::span(emb).first(3), std::span(state).first(3)));
  CHECK_FALSE(p->append(std::span(emb).subspan(3, 3), std::span(state).subspan(3, 1)));  // a row-wise row
  REQUIRE(p->append(std::span(emb).subspan(3), std::span(state).subspan(3)));
  CHECK(p->rows_written() == 4);
  REQUIRE(s.install(std::move(*p)));
  auto got = s.read(user);
  REQUIRE(got);
  CHECK(got->info.state_width == 3);
  CHECK(got->state.shape == std::vector<std::int64_t>{4, 3});
  CHECK(std::vector<float>(got->state.values.begin(), got->state.values.end()) == state);
  CHECK(s.find(user)->state_width == 3);
}

TEST_CASE("partition store: a damaged file is refused by name; open removes only an earlier run's files") {
  scratch_dir dir;
  auto id = dataset_id::random();
  {
    auto store = partition_store::open(dir.path(), id);
    REQUIRE(store);
    REQUIRE((*store)->store({"item", 0}, 5, 2, 2, ramp(4, 0.0f), ramp(2, 1.0f)));
    const auto file = (*store)->dir() / "p0.emb.abgt";
    REQUIRE(fs::exists(file));
    {
      std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
      f.seekp(static_cast<std::streamoff>(tensor_header_size + 2));
      f.put('\x7f');
    }
    auto bad = (*store)->read({"item", 0});
    REQUIRE_FALSE(bad);
    CHECK(bad.error().message.find(file.string()) != std::string::npos);
    CHECK(bad.error().message.find("checksum mismatch") != std::string::npos);
  }
  abg::test::write_text(dir / "notes.txt", "not the store's");
  abg::test::write_text(dir / ".p9.state.abgt.tmp.123", "a temporary left by a crash");
  auto again = partition_store::open(dir.path(), id);
  REQUIRE(again);
  CHECK((*again)->list().empty());
  CHECK(files_in(dir.path()) == 1);
  CHECK(fs::exists(dir / "notes.txt"));
}

TEST_CASE("partition store: a checkpoint links a version's files, which outlive the store's next version") {
  scratch_dir dir;
  auto id = dataset_id::random();
  auto store = partition_store::open(dir / "store", id);
  REQUIRE(store);
  auto& s = **store;
  const table_key user{"user", 0};
  auto emb = ramp(5 * 2, 1.0f);
  auto state = ramp(5, 7.0f);
  REQUIRE(s.store(user, 4, 5, 2, emb, state));
  fs::create_directories(dir / "ckpt");
  const auto emb_link = dir / "ckpt" / "e.abgt", state_link = dir / "ckpt" / "s.abgt";

  // Only the version stored is linked.
  auto stale = s.link_into(user, 3, emb_link, state_link);
  REQUIRE_FALSE(stale);
  CHECK(stale.error().message.find("version 4") != std::string::npos);
  CHECK_FALSE(s.link_into({"user", 1}, 4, emb_link, state_link));
  CHECK_FALSE(fs::exists(emb_link));

  auto linked = s.link_into(user, 4, emb_link, state_link);
  REQUIRE(linked);
  REQUIRE(*linked); // one filesystem: linked, not copied
  // The checkpoint's files are the store's: same blocks, two names each.
  CHECK(fs::hard_link_count(emb_link) == 2);
  CHECK(fs::hard_link_count(state_link) == 2);
  CHECK(bytes_in(s.dir()) == 2 * tensor_header_size + 15 * sizeof(float));
  CHECK((**linked)[0].bytes == tensor_header_size + 10 * sizeof(float));
  CHECK((**linked)[1].bytes == tensor_header_size + 5 * sizeof(float));
  // Size and checksum as a reader verifies them against a manifest.
  std::vector<float> back(10), back_state(5);
  auto h = read_tensor_file_into(emb_link, id, back);
  REQUIRE(h);
  CHECK(h->payload_checksum == (**linked)[0].checksum);
  CHECK(back == emb);
  auto hs = read_tensor_file_into(state_link, id, back_state);
  REQUIRE(hs);
  CHECK(hs->payload_checksum == (**linked)[1].checksum);
  CHECK(back_state == state);

  // A newer version replaces the store's names only; the linked version stays intact.
  REQUIRE(s.store(user, 5, 5, 2, ramp(10, 100.0f), ramp(5, 200.0f)));
  CHECK(fs::hard_link_count(emb_link) == 1);
  REQUIRE(read_tensor_file_into(emb_link, id, back));
  CHECK(back == emb);
  CHECK(s.read(user)->embeddings.values[0] == ramp(10, 100.0f)[0]);
  // Linking again under the same names replaces the files whole.
  auto again = s.link_into(user, 5, emb_link, state_link);
  REQUIRE(again);
  REQUIRE(*again);
  REQUIRE(read_tensor_file_into(emb_link, id, back));
  CHECK(back == ramp(10, 100.0f));
  s.clear();
  CHECK(files_in(s.dir()) == 0);
  REQUIRE(read_tensor_file_into(emb_link, id, back)); // the checkpoint keeps what the store let go
  CHECK(files_in(dir / "ckpt") == 2);                  // and no temporary is left
}
