// The TOML config: defaults, every validation error with its position,
// cross-field rules and warnings.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "abg/config.h"

namespace {

/// A valid config with one slot at the top (line 1), one in [entities.all]
/// (line 8) and one in the relation (line 13), to place a key under test.
std::string with(std::string_view top, std::string_view entity = "",
                 std::string_view relation = "") {
  return fmt::format(R"({}
entity_path = "e"
edge_paths = ["a", "b"]
checkpoint_path = "c"
dimension = 10
[entities.all]
num_partitions = 1
{}
[[relations]]
name = "r"
lhs = "all"
rhs = "all"
{}
)",
                     top, entity, relation);
}

abg::loaded_config load(std::string_view text, const std::vector<std::string>& overrides = {}) {
  auto r = abg::parse_config(text, "t.toml", overrides);
  if (!r)
    FAIL(r.error().message);
  return *r;
}

std::string errors(std::string_view text, const std::vector<std::string>& overrides = {}) {
  auto r = abg::parse_config(text, "t.toml", overrides);
  REQUIRE_FALSE(r.has_value());
  return r.error().message;
}

} // namespace

TEST_CASE("config: defaults are PBG's") {
  auto loaded = load(with(""));
  const auto& c = loaded.value;
  CHECK(loaded.warnings.empty());
  CHECK(c.entity_path == "e");
  CHECK(c.edge_paths == std::vector<std::string>{"a", "b"});
  CHECK(c.checkpoint_path == "c");
  CHECK(c.dimension == 10);
  CHECK_FALSE(c.init_path);
  CHECK_FALSE(c.checkpoint_preservation_interval);
  CHECK(c.init_scale == 1e-3);
  CHECK_FALSE(c.max_norm);
  CHECK(c.global_emb);
  CHECK(c.comparator == "cos");
  CHECK_FALSE(c.bias);
  CHECK(c.loss_fn == "ranking");
  CHECK(c.margin == 0.1);
  CHECK(c.regularization_coef == 0.0);
  CHECK(c.regularizer == "N3");
  CHECK(c.operator_init == "identity");
  CHECK(c.entity_optimizer == "row_adagrad");
  CHECK(c.query_dropout == 0.0);
  CHECK(c.candidate_dropout == 0.0);
  CHECK(c.query_entity_dropout == 0.0);
  CHECK(c.relation_dropout == 0.0);
  CHECK(c.all_negs_targets == "one");
  CHECK(c.all_negs_precision == "float32");
  CHECK(c.num_epochs == 1);
  CHECK_FALSE(c.num_edge_chunks);
  CHECK(c.max_edges_per_chunk == 1'000'000'000);
  CHECK(c.bucket_order == "inside_out");
  CHECK_FALSE(c.workers);
  CHECK(c.batch_size == 1000);
  CHECK(c.num_batch_negs == 50);
  CHECK(c.num_uniform_negs == 50);
  CHECK_FALSE(c.disable_lhs_negs);
  CHECK_FALSE(c.disable_rhs_negs);
  CHECK(c.lr == 1e-2);
  CHECK_FALSE(c.relation_lr);
  CHECK(c.eval_fraction == 0.05);
  CHECK(c.eval_num_batch_negs == 1000);
  CHECK(c.eval_num_uniform_negs == 1000);
  CHECK_FALSE(c.early_stopping);
  CHECK_FALSE(c.background_io);
  CHECK(c.verbose == 0);
  CHECK(c.hogwild_delay == 2.0);
  CHECK_FALSE(c.dynamic_relations);
  CHECK(c.num_machines == 1);
  CHECK(c.num_partition_servers == -1);
  CHECK_FALSE(c.distributed_init_method);
  CHECK(c.distributed_tree_init_order);
  CHECK(c.num_groups_for_partition_server == 16);
  CHECK(c.num_groups_per_sharded_partition_server == 1);
  CHECK(c.partition_shard_size == 250);
  CHECK(c.num_gpus == 0);
  CHECK_FALSE(c.half_precision);
  CHECK(c.checkpoint_keep_versions == 2);
  CHECK(c.checkpoint_every_buckets == 0);

  REQUIRE(c.entities.size() == 1);
  CHECK(c.entities[0].first == "all");
  const auto& e = c.entities[0].second;
  CHECK(e.num_partitions == 1);
  CHECK_FALSE(e.featurized);
  CHECK_FALSE(e.dimension);

  REQUIRE(c.relations.size() == 1);
  const auto& r = c.relations[0];
  CHECK(r.name == "r");
  CHECK(r.lhs == "all");
  CHECK(r.rhs == "all");
  CHECK(r.weight == 1.0);
  CHECK(r.operator_ == "none");
  CHECK_FALSE(r.all_negs);
}

TEST_CASE("config: numbers convert as PBG's Python would") {
  auto c = load(with("max_edges_per_chunk = 1e9\nlr = 1\nnum_epochs = 3.0")).value;
  CHECK(c.max_edges_per_chunk == 1'000'000'000);
  CHECK(c.lr == 1.0);
  CHECK(c.num_epochs == 3);
}

TEST_CASE("config: entity types keep file order; lookups") {
  auto c = load(R"(
entity_path = "e"
edge_paths = []
checkpoint_path = "c"
dimension = 8
[entities.zeta]
num_partitions = 1
[entities.alpha]
num_partitions = 1
dimension = 4
[entities.mid]
num_partitions = 1
[[relations]]
name = "r"
lhs = "zeta"
rhs = "alpha"
)")
             .value;
  REQUIRE(c.entities.size() == 3);
  CHECK(c.entities[0].first == "zeta");
  CHECK(c.entities[1].first == "alpha");
  CHECK(c.entities[2].first == "mid");
  CHECK(c.entity("alpha") == &c.entities[1].second);
  CHECK(c.entity("nope") == nullptr);
  CHECK(c.dimension_of("alpha") == 4);
  CHECK(c.dimension_of("zeta") == 8);
}

TEST_CASE("config: each invalid value names file:line:column, key, given and expected") {
  struct bad {
    std::string top, entity, relation, message;
  };
  const std::vector<bad> cases{
    {"init_scale = 0", "", "", "t.toml:1:14: init_scale: got 0, expected a positive number"},
    {"max_norm = -1.5", "", "", "t.toml:1:12: max_norm: got -1.5, expected a positive number"},
    {"num_epochs = -1", "", "",
     "t.toml:1:14: num_epochs: got -1, expected a non-negative integer"},
    {"num_epochs = 1.5", "", "",
     "t.toml:1:14: num_epochs: got 1.5, expected a non-negative integer"},
    {"num_epochs = \"3\"", "", "",
     "t.toml:1:14: num_epochs: got \"3\", expected a non-negative integer"},
    {"global_emb = 1", "", "", "t.toml:1:14: global_emb: got 1, expected true or false"},
    {"init_path = 3", "", "", "t.toml:1:13: init_path: got 3, expected a string"},
    {"comparator = \"cosine\"", "", "",
     "t.toml:1:14: comparator: got \"cosine\", expected one of dot, cos, l2, squared_l2"},
    {"loss_fn = \"hinge\"", "", "",
     "t.toml:1:11: loss_fn: got \"hinge\", expected one of ranking, logistic, softmax"},
    {"regularizer = \"N2\"", "", "", "t.toml:1:15: regularizer: got \"N2\", expected one of N3, N3_kbc"},
    {"operator_init = \"zeros\"", "", "", "t.toml:1:17: operator_init: got \"zeros\", expected one of identity, random"},
    {"entity_optimizer = \"sgd\"", "", "",
     "t.toml:1:20: entity_optimizer: got \"sgd\", expected one of row_adagrad, adagrad"},
    {"query_dropout = -0.5", "", "", "t.toml:1:17: query_dropout: got -0.5, expected a number in [0, 1]"},
    {"candidate_dropout = 2", "", "", "t.toml:1:21: candidate_dropout: got 2, expected a number in [0, 1]"},
    {"all_negs_targets = \"all\"", "", "", "t.toml:1:20: all_negs_targets: got \"all\", expected one of one, known"},
    {"all_negs_precision = \"half\"", "", "",
     "t.toml:1:22: all_negs_precision: got \"half\", expected one of float32, bfloat16"},
    {"bucket_order = \"chaos\"", "", "",
     "t.toml:1:16: bucket_order: got \"chaos\", expected one of random, affinity, inside_out, "
     "outside_in, buffer"},
    {"eval_fraction = 1.5", "", "",
     "t.toml:1:17: eval_fraction: got 1.5, expected a number in [0, 1]"},
    {"num_partition_servers = -2", "", "",
     "t.toml:1:25: num_partition_servers: got -2, expected an integer >= -1"},
    {"regularization_coef = -0.1", "", "",
     "t.toml:1:23: regularization_coef: got -0.1, expected a non-negative number"},
    {"lr = -1", "", "", "t.toml:1:6: lr: got -1, expected a non-negative number"},
    {"relation_lr = -1", "", "",
     "t.toml:1:15: relation_lr: got -1, expected a non-negative number"},
    {"workers = 0", "", "", "t.toml:1:11: workers: got 0, expected a positive integer"},
    {"batch_size = 0", "", "", "t.toml:1:14: batch_size: got 0, expected a positive integer"},
    {"num_batch_negs = -1", "", "",
     "t.toml:1:18: num_batch_negs: got -1, expected a non-negative integer"},
    {"num_uniform_negs = -1", "", "",
     "t.toml:1:20: num_uniform_negs: got -1, expected a non-negative integer"},
    {"eval_num_batch_negs = -1", "", "",
     "t.toml:1:23: eval_num_batch_negs: got -1, expected a non-negative integer"},
    {"eval_num_uniform_negs = -1", "", "",
     "t.toml:1:25: eval_num_uniform_negs: got -1, expected a non-negative integer"},
    {"verbose = -1", "", "", "t.toml:1:11: verbose: got -1, expected a non-negative integer"},
    {"hogwild_delay = -1", "", "",
     "t.toml:1:17: hogwild_delay: got -1, expected a non-negative number"},
    {"num_machines = 0", "", "", "t.toml:1:16: num_machines: got 0, expected a positive integer"},
    {"num_groups_for_partition_server = 0", "", "",
     "t.toml:1:35: num_groups_for_partition_server: got 0, expected a positive integer"},
    {"num_groups_per_sharded_partition_server = 0", "", "",
     "t.toml:1:43: num_groups_per_sharded_partition_server: got 0, expected a positive integer"},
    {"partition_shard_size = 0", "", "",
     "t.toml:1:24: partition_shard_size: got 0, expected a positive integer"},
    {"checkpoint_preservation_interval = 0", "", "",
     "t.toml:1:36: checkpoint_preservation_interval: got 0, expected a positive integer"},
    {"num_edge_chunks = 0", "", "",
     "t.toml:1:19: num_edge_chunks: got 0, expected a positive integer"},
    {"max_edges_per_chunk = 0", "", "",
     "t.toml:1:23: max_edges_per_chunk: got 0, expected a positive integer"},
    {"num_gpus = -1", "", "", "t.toml:1:12: num_gpus: got -1, expected a non-negative integer"},
    {"checkpoint_keep_versions = 0", "", "",
     "t.toml:1:28: checkpoint_keep_versions: got 0, expected a positive integer"},
    {"checkpoint_every_buckets = -1", "", "",
     "t.toml:1:28: checkpoint_every_buckets: got -1, expected a non-negative integer"},
    {"num_epoch = 3", "", "", "t.toml:1:1: num_epoch: unknown key, did you mean 'num_epochs'?"},
    {"flux_capacitor = 1", "", "",
     "t.toml:1:1: flux_capacitor: unknown key (abg config --help lists the keys)"},
    {"entites = 1", "", "", "t.toml:1:1: entites: unknown key, did you mean 'entities'?"},
    {"reciprocal_relations = true", "", "",
     "t.toml:1:1: reciprocal_relations: unknown key; kbc's and LibKGE's reciprocal relations are PBG's "
     "dynamic_relations = true here: each relation gets its own lhs and rhs operators, and heads are ranked "
     "through the rhs one (docs/config.md)"},
    {"", "dimension = 0", "",
     "t.toml:8:13: entities.all.dimension: got 0, expected a positive integer"},
    {"", "featurized = \"yes\"", "",
     "t.toml:8:14: entities.all.featurized: got \"yes\", expected true or false"},
    {"", "num_partition = 2", "",
     "t.toml:8:1: entities.all.num_partition: unknown key, did you mean 'num_partitions'?"},
    {"", "", "weight = 0", "t.toml:13:10: relations.0.weight: got 0, expected a positive number"},
    {"", "", "operator = \"complx_diagonal\"",
     "t.toml:13:12: relations.0.operator: got \"complx_diagonal\", expected one of none, "
     "diagonal, translation, linear, affine, complex_diagonal"},
    {"", "", "all_negs = 1", "t.toml:13:12: relations.0.all_negs: got 1, expected true or false"},
    {"", "", "lr = 0.1",
     "t.toml:13:1: relations.0.lr: unknown key here; 'lr' is a top-level key, so it must come "
     "before the first [table] header"},
    {"", "", "operatr = \"none\"",
     "t.toml:13:1: relations.0.operatr: unknown key, did you mean 'operator'?"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.message);
    CHECK(errors(with(c.top, c.entity, c.relation)) == c.message);
  }
}

TEST_CASE("config: required keys, pointing at the table that lacks them") {
  CHECK(errors(R"(entity_path = "e"
[entities.all]
[[relations]]
name = "r"
rhs = "all"
)") == "t.toml:1:1: edge_paths: missing, expected a list of strings\n"
       "t.toml:1:1: checkpoint_path: missing, expected a string\n"
       "t.toml:1:1: dimension: missing, expected a positive integer\n"
       "t.toml:2:1: entities.all.num_partitions: missing, expected a positive integer\n"
       "t.toml:3:1: relations.0.lhs: missing, expected a non-empty string");
  CHECK(errors("dimension = 1\nentity_path = \"e\"\nedge_paths = []\ncheckpoint_path = \"c\"\n")
        == "t.toml:1:1: entities: missing, expected at least one [entities.NAME] table\n"
           "t.toml:1:1: relations: missing, expected at least one [[relations]] table");
}

TEST_CASE("config: wrong shapes of entities and relations") {
  const std::string head = "dimension = 1\nentity_path = \"e\"\nedge_paths = []\n"
                           "checkpoint_path = \"c\"\n";
  CHECK(errors(head + "entities = 3\nrelations = [1]\n")
        == "t.toml:5:12: entities: got 3, expected at least one [entities.NAME] table\n"
           "t.toml:6:14: relations.0: got 1, expected a table of the relation's keys");
  CHECK(errors(head + "entities = {}\nrelations = []\n")
        == "t.toml:5:12: entities: got no entity type, expected at least one [entities.NAME] "
           "table\n"
           "t.toml:6:13: relations: got no relation, expected at least one [[relations]] table");
  CHECK(errors(head + "relations = \"r\"\n[entities]\nall = 2\n")
        == "t.toml:5:13: relations: got \"r\", expected at least one [[relations]] table\n"
           "t.toml:7:7: entities.all: got 2, expected a table of the entity type's keys");
  auto text = with("");
  text.replace(text.find("[\"a\", \"b\"]"), 10, "[\"a\", 3, true]");
  CHECK(errors(text) == ("t.toml:3:20: edge_paths.1: got 3, expected a string\n"
                     "t.toml:3:23: edge_paths.2: got true, expected a string"));
}

TEST_CASE("config: TOML syntax errors name file:line:column") {
  CHECK(errors("dimension = \n").starts_with("t.toml:1:13: invalid TOML: "));
  CHECK(errors("a = 1\na = 2\n").starts_with("t.toml:2:"));
}

TEST_CASE("config: several errors are reported together, in file order") {
  auto message = errors(with("lr = \"fast\"\nnum_epoch = 2", "dimension = -3",
                             "operator = \"complx_diagonal\""));
  CHECK(message
        == "t.toml:1:6: lr: got \"fast\", expected a non-negative number\n"
           "t.toml:2:1: num_epoch: unknown key, did you mean 'num_epochs'?\n"
           "t.toml:9:13: entities.all.dimension: got -3, expected a positive integer\n"
           "t.toml:14:12: relations.0.operator: got \"complx_diagonal\", expected one of none, "
           "diagonal, translation, linear, affine, complex_diagonal");
}

TEST_CASE("config: PBG's cross-field rules") {
  CHECK(errors(with("dynamic_relations = true", "",
                    "[[relations]]\nname = \"s\"\nlhs = \"all\"\nrhs = \"all\""))
        == "t.toml:1:21: dynamic_relations: got true with 2 [[relations]] entries, expected "
           "exactly one (with dynamic relations it is the schema every relation type shares)");
  CHECK(errors(with("disable_lhs_negs = true\ndisable_rhs_negs = true"))
        == "t.toml:2:20: disable_rhs_negs: got true while disable_lhs_negs is true too, expected "
           "negatives on at least one side");
  CHECK(errors(with("", "", "[[relations]]\nname = \"s\"\nlhs = \"al\"\nrhs = \"user\""))
        == "t.toml:15:7: relations.1.lhs: got \"al\", expected a defined entity type ('all'), did "
           "you mean 'all'?\n"
           "t.toml:16:7: relations.1.rhs: got \"user\", expected a defined entity type ('all')");
  CHECK(errors(with("", "", "[[relations]]\nname = \"\"\nlhs = \"all\"\nrhs = \"all\""))
        == "t.toml:14:8: relations.1.name: got \"\", expected a non-empty string");
}

TEST_CASE("config: rules PBG only notes are warnings") {
  auto w = load(with("num_batch_negs = 30\nloss_fn = \"logistic\"\nbackground_io = true")).warnings;
  REQUIRE(w.size() == 3);
  CHECK(w[0] == "t.toml:1:1: batch_size: 1000 is not a multiple of num_batch_negs (30): the last "
                "chunk of each batch has fewer batch negatives");
  CHECK(w[1] == "t.toml:2:11: loss_fn: logistic loss with the cos comparator (scores in [-1, 1]) "
                "rarely learns well");
  CHECK(w[2] == "t.toml:3:17: background_io: deprecated in PBG, has no effect");

  // early_stopping measures the held-out loss: without held-out edges it cannot act
  w = load(with("early_stopping = true\neval_fraction = 0")).warnings;
  REQUIRE(w.size() == 1);
  CHECK(w[0] == "t.toml:1:18: early_stopping: true with eval_fraction = 0: there are no held-out edges to "
                "measure the loss on, so training never stops early; set eval_fraction > 0 (e.g. 0.05)");
  CHECK(load(with("early_stopping = true")).warnings.empty()); // eval_fraction defaults to 0.05

  // torch.distributed knobs: accepted as PBG does, with a word that they tune nothing here
  w = load(with("distributed_init_method = \"tcp://h:1\"\nnum_groups_for_partition_server = 8\n"
                "num_groups_per_sharded_partition_server = 2\npartition_shard_size = 100"))
        .warnings;
  // (distributed_init_method is abg train --rank's rendezvous, no warning)
  REQUIRE(w.size() == 3);
  CHECK(w[0].starts_with("t.toml:2:35: num_groups_for_partition_server: has no effect"));
  CHECK(w[1].starts_with("t.toml:3:43: num_groups_per_sharded_partition_server: has no effect"));
  CHECK(w[2] == "t.toml:4:24: partition_shard_size: has no effect: partitions travel in chunks of at most 8 MiB, "
                "requested one at a time");
  CHECK(load(with("num_groups_for_partition_server = 16\npartition_shard_size = 250")).warnings.empty());

  w = load(with("", "dimension = 7", "operator = \"complex_diagonal\"")).warnings;
  REQUIRE(w.size() == 1);
  CHECK(w[0] == "t.toml:13:12: relations.0.operator: complex_diagonal needs an even dimension "
                "(real half, imaginary half), but entity type 'all' has dimension 7");

  w = load(with("", "", "[entities.b]\nnum_partitions = 2\n[entities.c]\nnum_partitions = 4\n"
                        "[[relations]]\nname = \"s\"\nlhs = \"b\"\nrhs = \"all\"\n"
                        "[[relations]]\nname = \"t\"\nlhs = \"c\"\nrhs = \"all\""))
        .warnings;
  REQUIRE(w.size() == 1);
  CHECK(w[0] == "t.toml:6:1: entities: partitioned entity types on the lhs side of relations "
                "have different num_partitions (b: 2, c: 4); training needs one count per side");
}

TEST_CASE("config: checkpoint_mode and checkpoint_replicas") {
  auto c = load(with("checkpoint_mode = \"local\"\ncheckpoint_replicas = 1")).value;
  CHECK(c.checkpoint_mode == "local");
  CHECK(c.checkpoint_replicas == 1);
  CHECK(load(with("")).value.checkpoint_mode == "gather");
  CHECK(errors(with("checkpoint_mode = \"spread\"")).find("checkpoint_mode: got \"spread\", expected one of") !=
        std::string::npos);
  CHECK(errors(with("checkpoint_replicas = 1"))
          .find("checkpoint_replicas: got 1 with checkpoint_mode = \"gather\", expected 0") != std::string::npos);
  CHECK(errors(with("checkpoint_mode = \"local\"\ncheckpoint_replicas = 2"))
          .find("checkpoint_replicas: got 2, expected 0 or 1") != std::string::npos);
}

TEST_CASE("config: buffer_capacity and the buffer order") {
  auto partitioned = [](std::string_view top, int lhs_parts, int rhs_parts) {
    return fmt::format(R"({}
entity_path = "e"
edge_paths = ["a"]
checkpoint_path = "c"
dimension = 10
[entities.l]
num_partitions = {}
[entities.r]
num_partitions = {}
[[relations]]
name = "r"
lhs = "l"
rhs = "r"
)",
                       top, lhs_parts, rhs_parts);
  };
  CHECK(load(with("")).value.buffer_capacity == 0);
  auto c = load(partitioned("buffer_capacity = 4\nbucket_order = \"buffer\"", 8, 8)).value;
  CHECK(c.buffer_capacity == 4);
  CHECK(c.bucket_order == "buffer");
  CHECK(load(partitioned("buffer_capacity = 1", 8, 1)).value.buffer_capacity == 1);
  CHECK(errors(partitioned("buffer_capacity = 1", 8, 8))
          .find("t.toml:1:19: buffer_capacity: got 1, expected 0 (no limit) or at least 2: one bucket needs a "
                "partition of each partitioned side in memory") != std::string::npos);
  CHECK(errors(with("buffer_capacity = 3"))
          .find("buffer_capacity: got 3 but no entity type of a relation is partitioned") != std::string::npos);
  CHECK(errors(partitioned("buffer_capacity = -1", 8, 8))
          .find("buffer_capacity: got -1, expected a non-negative integer") != std::string::npos);
  CHECK(errors(partitioned("bucket_order = \"buffer\"", 8, 8))
          .find("bucket_order: got \"buffer\" with buffer_capacity = 0, expected a buffer_capacity of at least 2") !=
        std::string::npos);
}
