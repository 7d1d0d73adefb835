// to_toml round trip, equality over every key, PBG configs and the examples.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "abg/config.h"
#include "runtime/config/fields.h"

namespace {

namespace fs = std::filesystem;

const fs::path source_root = fs::path(__FILE__).parent_path().parent_path().parent_path();

abg::loaded_config load(std::string_view text) {
  auto r = abg::parse_config(text, "t.toml");
  if (!r)
    FAIL(r.error().message);
  return *r;
}

/// A config with every key set away from its default, and names that need quoting.
abg::config everything() {
  abg::config c;
  c.entities = {{"user", {.num_partitions = 4, .featurized = true, .dimension = 12}},
                {"my \"odd\" type", {.num_partitions = 4}},
                {"ünïcode.dotted", {.num_partitions = 1}}};
  c.relations = {{.name = "follows",
                  .lhs = "user",
                  .rhs = "my \"odd\" type",
                  .weight = 0.25,
                  .operator_ = "affine",
                  .all_negs = true},
                 {.name = "tab\there\nnewline \\ back", .lhs = "ünïcode.dotted",
                  .rhs = "user", .operator_ = "translation"}};
  c.dimension = 200;
  c.init_scale = 0.1;
  c.max_norm = 1.5;
  c.global_emb = false;
  c.comparator = "l2";
  c.bias = true;
  c.loss_fn = "logistic";
  c.margin = 0.3;
  c.regularization_coef = 1e-7;
  c.entity_path = "data/ent ity";
  c.edge_paths = {"a", "b/'quoted'", "c\"d"};
  c.checkpoint_path = "/abs/model";
  c.init_path = "init";
  c.checkpoint_preservation_interval = 5;
  c.num_epochs = 30;
  c.num_edge_chunks = 7;
  c.max_edges_per_chunk = 123'456'789'012;
  c.bucket_order = "affinity";
  c.workers = 3;
  c.batch_size = 512;
  c.num_batch_negs = 64;
  c.num_uniform_negs = 0;
  c.disable_lhs_negs = true;
  c.lr = 0.123456789012345;
  c.relation_lr = 1e-300;
  c.eval_fraction = 1;
  c.eval_num_batch_negs = 0;
  c.eval_num_uniform_negs = 17;
  c.early_stopping = true;
  c.background_io = true;
  c.verbose = 1;
  c.hogwild_delay = 0.5;
  c.dynamic_relations = false;
  c.num_machines = 8;
  c.num_partition_servers = 0;
  c.distributed_init_method = "tcp://10.0.0.1:30050";
  c.distributed_tree_init_order = false;
  c.num_groups_for_partition_server = 4;
  c.num_groups_per_sharded_partition_server = 2;
  c.partition_shard_size = 100;
  c.num_gpus = 2;
  c.half_precision = true;
  c.checkpoint_keep_versions = 5;
  c.checkpoint_every_buckets = 7;
  c.seed = 42;
  return c;
}

/// Moves every member a field table names away from its current value.
template <class S, std::size_t N>
void check_each_field_counts(const std::array<abg::config_detail::field<S>, N>& fields,
                             const abg::config& base, S& (*part)(abg::config&)) {
  for (const auto& f : fields) {
    CAPTURE(f.name);
    auto changed = base;
    std::visit(
      [&](auto ptr) {
        auto& v = part(changed).*ptr;
        using M = std::remove_cvref_t<decltype(v)>;
        if constexpr (std::is_same_v<M, bool>)
          v = !v;
        else if constexpr (std::is_same_v<M, std::string>)
          v += "x";
        else if constexpr (std::is_same_v<M, std::vector<std::string>>)
          v.push_back("x");
        else if constexpr (requires { v.reset(); })
          v.reset();
        else
          v += 1;
      },
      f.ptr);
    CHECK_FALSE(changed == base);
  }
}

std::string read(const fs::path& p) {
  std::ifstream in(p);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

} // namespace

TEST_CASE("config: to_toml round trip with every key set") {
  auto c = everything();
  auto text = abg::to_toml(c);
  CAPTURE(text);
  auto back = load(text);
  CHECK(back.value == c);
  CHECK(abg::to_toml(back.value) == text);
}

TEST_CASE("config: to_toml fills defaults and leaves none-defaults out") {
  auto c = load(R"(entity_path = "e"
edge_paths = []
checkpoint_path = "c"
dimension = 10
[entities.all]
num_partitions = 1
[[relations]]
name = "r"
lhs = "all"
rhs = "all"
)")
             .value;
  auto text = abg::to_toml(c);
  CHECK(text.find("init_scale = 0.001\n") != std::string::npos);
  CHECK(text.find("max_edges_per_chunk = 1000000000\n") != std::string::npos);
  CHECK(text.find("hogwild_delay = 2.0\n") != std::string::npos);
  CHECK(text.find("edge_paths = []\n") != std::string::npos);
  CHECK(text.find("operator = \"none\"\n") != std::string::npos);
  CHECK(text.find("checkpoint_keep_versions = 2\n") != std::string::npos);
  CHECK(text.find("max_norm") == std::string::npos);
  CHECK(text.find("workers") == std::string::npos);
  CHECK(text.find("init_path") == std::string::npos);
  CHECK(text.find("\n[entities.all]\nnum_partitions = 1\nfeaturized = false\n")
        != std::string::npos);
  CHECK(load(text).value == c);
}

TEST_CASE("config: equality covers every key") {
  auto base = everything();
  CHECK(base == everything());
  check_each_field_counts<abg::config>(abg::config_detail::config_fields, base,
                                       [](abg::config& c) -> abg::config& { return c; });
  check_each_field_counts<abg::entity_schema>(
    abg::config_detail::entity_fields, base,
    [](abg::config& c) -> abg::entity_schema& { return c.entities[0].second; });
  check_each_field_counts<abg::relation_schema>(
    abg::config_detail::relation_fields, base,
    [](abg::config& c) -> abg::relation_schema& { return c.relations[0]; });
  auto renamed = base;
  renamed.entities[0].first = "other";
  CHECK_FALSE(renamed == base);
}

TEST_CASE("config: a PBG config with every field set loads") {
  // PBG's ConfigSchema, every key, written as a PBG user would (1e9, 2 for 2.0).
  auto loaded = load(R"(
entity_path = "data/FB15k"
edge_paths = ["data/FB15k/freebase_mtr100_mte100-train_partitioned"]
checkpoint_path = "model/fb15k"
init_path = "model/init"
checkpoint_preservation_interval = 2
dimension = 400
init_scale = 0.001
max_norm = 10
global_emb = false
comparator = "dot"
bias = false
loss_fn = "softmax"
margin = 0.1
regularization_coef = 1e-3
regularizer = "N3"
num_epochs = 50
num_edge_chunks = 1
max_edges_per_chunk = 1e9
bucket_order = "inside_out"
workers = 2
batch_size = 1000
num_batch_negs = 500
num_uniform_negs = 500
disable_lhs_negs = false
disable_rhs_negs = false
lr = 0.1
relation_lr = 0.01
eval_fraction = 0
eval_num_batch_negs = 10000
eval_num_uniform_negs = 0
early_stopping = false
background_io = false
verbose = 1
hogwild_delay = 2
dynamic_relations = true
num_machines = 1
num_partition_servers = -1
distributed_init_method = "tcp://localhost:30050"
distributed_tree_init_order = true
num_groups_for_partition_server = 16
num_groups_per_sharded_partition_server = 1
partition_shard_size = 250
num_gpus = 0
half_precision = false

[entities.all]
num_partitions = 1
featurized = false
dimension = 400

[[relations]]
name = "all_edges"
lhs = "all"
rhs = "all"
weight = 1
operator = "complex_diagonal"
all_negs = false
)");
  // PBG's own config: no warning.
  CHECK(loaded.warnings.empty());
  const auto& c = loaded.value;
  CHECK(c.max_edges_per_chunk == 1'000'000'000);
  CHECK(c.max_norm == 10.0);
  CHECK(c.hogwild_delay == 2.0);
  CHECK(c.relations[0].operator_ == "complex_diagonal");
  CHECK(c.eval_num_uniform_negs == 0);
}

TEST_CASE("config: the examples in config/ load without warnings") {
  std::vector<fs::path> examples;
  for (const auto& e : fs::directory_iterator(source_root / "config"))
    if (e.path().extension() == ".toml" && !e.path().filename().string().starts_with("cluster-"))
      examples.push_back(e.path()); // cluster files are not training configs (cluster_file_test.cpp)
  CHECK(examples.size() >= 4);
  for (const auto& p : examples) {
    CAPTURE(p);
    auto r = abg::load_config(p);
    REQUIRE_MESSAGE(r.has_value(), (r ? "" : r.error().message));
    CHECK(r->warnings.empty());
    auto back = abg::parse_config(abg::to_toml(r->value), "printed");
    REQUIRE(back.has_value());
    CHECK(back->value == r->value);
  }
  auto fb = abg::load_config(source_root / "config/fb15k237.toml");
  REQUIRE(fb);
  CHECK(fb->value.dimension == 400);
  CHECK(fb->value.edge_paths.size() == 3);
  CHECK(fb->value.relations[0].operator_ == "complex_diagonal");
  auto slashdot = abg::load_config(source_root / "config/slashdot.toml");
  REQUIRE(slashdot);
  CHECK(slashdot->value.entity("node")->num_partitions == 4);
  CHECK_FALSE(slashdot->value.dynamic_relations);
}

TEST_CASE("config: load_config reports unreadable files") {
  auto r = abg::load_config("/nonexistent/abg.toml");
  REQUIRE_FALSE(r);
  CHECK(r.error().message.starts_with("/nonexistent/abg.toml: cannot read the config: "));
}

TEST_CASE("config: every key is in the key reference and in docs/config.md") {
  auto reference = abg::describe_config_keys();
  auto docs = read(source_root / "docs/config.md");
  auto check = [&](std::string_view name) {
    CAPTURE(name);
    CHECK(reference.find(fmt::format("  {} ", name)) != std::string::npos);
    CHECK(docs.find(fmt::format("`{}`", name)) != std::string::npos);
  };
  for (const auto& f : abg::config_detail::config_fields)
    check(f.name);
  for (const auto& f : abg::config_detail::entity_fields)
    check(f.name);
  for (const auto& f : abg::config_detail::relation_fields)
    check(f.name);
}
