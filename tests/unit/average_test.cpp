// Checkpoint averaging: the new version is the element-wise mean of the last
// K end-of-epoch versions' parameters, with the newest's optimizer state and
// position; what cannot be averaged is refused before anything is written.
#include <doctest/doctest.h>

#include "abg/storage/average.h"
#include "abg/storage/checkpoint.h"
#include "abg/storage/entity_store.h"
#include "tests/test_util.h"

namespace fs = std::filesystem;
using namespace abg::storage;
using abg::test::scratch_dir;

namespace {

// Version v's values: distinct per version, table and element.
std::vector<float> values(std::size_t n, std::int64_t v, float base) {
  std::vector<float> out(n);
  for (std::size_t i = 0; i < n; ++i)
    out[i] = base + static_cast<float>(v * v) * 0.25f + 0.01f * static_cast<float>(i);
  return out;
}

struct fixture {
  scratch_dir dir;
  abg::config cfg;
  dataset_id id = dataset_id::random();
  static constexpr std::int64_t user_rows = 3, item_rows = 2;
  const std::string diag = relation_param_name(0, "rhs", "diagonal");

  fixture() {
    cfg.entity_path = (dir / "entities").string();
    cfg.checkpoint_path = (dir / "model").string();
    cfg.dimension = 4;
    cfg.checkpoint_keep_versions = 10;
    cfg.entities = {{"user", {.num_partitions = 1}}, {"item", {.num_partitions = 1, .dimension = 3}}};
    cfg.relations = {{.name = "likes", .lhs = "user", .rhs = "item", .operator_ = "diagonal"}};
    fs::create_directories(cfg.entity_path);
    entity_store_meta meta{id, {{"user", {user_rows}}, {"item", {item_rows}}}, {"likes"}, false};
    REQUIRE(write_entity_meta(cfg.entity_path, meta));
  }

  // Version v as training commits it at the end of 0-based `epoch`; `epoch_complete` false: within it.
  void commit(std::int64_t v, std::int64_t epoch, bool epoch_complete = true) {
    auto w = checkpoint_writer::begin(cfg.checkpoint_path, v, checkpoint_settings::from(cfg, id, "x = 1\n"));
    REQUIRE(w);
    REQUIRE(w->put_embeddings("user", 0, values(user_rows * 4, v, 1.0f), user_rows, 4));
    REQUIRE(w->put_optimizer("user", 0, values(user_rows, v, 100.0f)));
    REQUIRE(w->put_embeddings("item", 0, values(item_rows * 3, v, -5.0f), item_rows, 3));
    REQUIRE(w->put_shared(diag, {3}, values(3, v, 0.5f)));
    REQUIRE(w->put_shared(optimizer_state_name(diag), {3}, values(3, v, 7.0f)));
    REQUIRE(w->put_shared(global_embedding_name("user"), {4}, values(4, v, -0.1f)));
    REQUIRE(w->commit({.epoch = epoch, .epoch_complete = epoch_complete}, {{"loss", 1.0 / static_cast<double>(v)}}));
  }

  // The mean over versions `vs` of values(n, v, base), as the average must hold it.
  static std::vector<float> mean(std::size_t n, std::vector<std::int64_t> vs, float base) {
    std::vector<float> out(n, 0.0f);
    for (auto v : vs) {
      auto x = values(n, v, base);
      for (std::size_t i = 0; i < n; ++i)
        out[i] += x[i] / static_cast<float>(vs.size());
    }
    return out;
  }
};

void check_near(std::span<const float> got, const std::vector<float>& want) {
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < want.size(); ++i)
    CHECK(got[i] == doctest::Approx(want[i]).epsilon(1e-6));
}

std::string error_of(const abg::expected<average_summary>& r) {
  REQUIRE_FALSE(r);
  return r.error().message;
}

} // namespace

TEST_CASE("average: the mean of the last K end-of-epoch versions, with the newest's optimizer state") {
  fixture f;
  for (std::int64_t v = 1; v <= 3; ++v)
    f.commit(v, v - 1);
  f.commit(4, 3, false); // within epoch 3: passed over
  f.commit(5, 3);
  f.cfg.checkpoint_keep_versions = 2;
  auto s = average_checkpoints(f.cfg, 3);
  REQUIRE(s);
  CHECK(s->version == 6);
  CHECK(s->averaged == std::vector<std::int64_t>{2, 3, 5});
  CHECK(s->tables == 2);
  CHECK(s->shared == 2); // the diagonal and the global embedding; the optimizer state is copied

  auto r = checkpoint_reader::open(f.cfg.checkpoint_path, f.id);
  REQUIRE(r);
  CHECK(r->version() == 6);
  CHECK(r->manifest().position.epoch == 3);
  CHECK(r->manifest().position.epoch_complete);
  CHECK(r->manifest().stats["averaged_versions"] == nlohmann::json{2, 3, 5});
  CHECK(r->manifest().stats["loss"] == 0.2);
  auto user = r->embeddings("user", 0);
  REQUIRE(user);
  check_near(user->data, fixture::mean(fixture::user_rows * 4, {2, 3, 5}, 1.0f));
  auto item = r->embeddings("item", 0);
  REQUIRE(item);
  check_near(item->data, fixture::mean(fixture::item_rows * 3, {2, 3, 5}, -5.0f));
  auto state = r->optimizer("user", 0);
  REQUIRE(state);
  check_near(state->data, values(fixture::user_rows, 5, 100.0f));
  CHECK_FALSE(r->optimizer("item", 0));
  auto shared = r->shared();
  REQUIRE(shared);
  check_near(shared->values(*shared->find(f.diag)), fixture::mean(3, {2, 3, 5}, 0.5f));
  check_near(shared->values(*shared->find(optimizer_state_name(f.diag))), values(3, 5, 7.0f));
  check_near(shared->values(*shared->find(global_embedding_name("user"))), fixture::mean(4, {2, 3, 5}, -0.1f));
  // The averaged versions stay, though the config keeps fewer.
  CHECK(committed_checkpoint_versions(f.cfg.checkpoint_path) == std::vector<std::int64_t>{2, 3, 4, 5, 6});

  SUBCASE("an average is not averaged again") {
    CHECK(error_of(average_checkpoints(f.cfg, 2)).find("is already an average") != std::string::npos);
  }
  SUBCASE("after training on, the average is passed over") {
    f.cfg.checkpoint_keep_versions = 10;
    f.commit(7, 4);
    auto again = average_checkpoints(f.cfg, 2);
    REQUIRE(again);
    CHECK(again->averaged == std::vector<std::int64_t>{5, 7});
  }
}

TEST_CASE("average: refused, with nothing written, when too few versions are kept or the config differs") {
  fixture f;
  f.cfg.checkpoint_keep_versions = 2;
  for (std::int64_t v = 1; v <= 3; ++v)
    f.commit(v, v - 1);
  auto before = committed_checkpoint_versions(f.cfg.checkpoint_path);
  CHECK(before == std::vector<std::int64_t>{2, 3});
  auto too_few = error_of(average_checkpoints(f.cfg, 3));
  CHECK(too_few.find("keeps 2 end-of-epoch training version(s)") != std::string::npos);
  CHECK(too_few.find("checkpoint_keep_versions >= 3") != std::string::npos);
  CHECK(error_of(average_checkpoints(f.cfg, 1)).find("at least 2") != std::string::npos);
  auto other = f.cfg;
  other.dimension = 8;
  CHECK_FALSE(average_checkpoints(other, 2));
  CHECK(committed_checkpoint_versions(f.cfg.checkpoint_path) == before);
  CHECK_FALSE(fs::exists(fs::path(f.cfg.checkpoint_path) / "v4"));

  SUBCASE("a version preserved epochs earlier does not stand in for the epochs between") {
    auto gap = f.cfg;
    gap.checkpoint_path = (f.dir / "gap").string();
    gap.checkpoint_keep_versions = 3;
    for (auto [v, epoch] : {std::pair{1, 0}, {2, 4}, {3, 5}}) {
      auto w = checkpoint_writer::begin(gap.checkpoint_path, v, checkpoint_settings::from(gap, f.id, "x = 1\n"));
      REQUIRE(w);
      REQUIRE(w->put_embeddings("user", 0, values(fixture::user_rows * 4, v, 1.0f), fixture::user_rows, 4));
      REQUIRE(w->put_embeddings("item", 0, values(fixture::item_rows * 3, v, 1.0f), fixture::item_rows, 3));
      REQUIRE(w->commit({.epoch = epoch, .epoch_complete = true}));
    }
    CHECK(error_of(average_checkpoints(gap, 3)).find("ends epoch 1, but the next version kept after it, 2, ends "
                                                      "epoch 5") != std::string::npos);
    CHECK(average_checkpoints(gap, 2));
  }
  scratch_dir empty;
  auto none = f.cfg;
  none.checkpoint_path = (empty / "model").string();
  CHECK(error_of(average_checkpoints(none, 2)).find("holds no committed version") != std::string::npos);
}
