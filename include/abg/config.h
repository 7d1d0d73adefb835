// The training config: PBG's schema (names, types, defaults) read from TOML.
// "none" defaults are std::nullopt. Keys abg adds beyond PBG are marked.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "abg/error.h"

namespace abg {

struct entity_schema {
  std::int64_t num_partitions = 0; // required, > 0
  bool featurized = false;
  std::optional<std::int64_t> dimension; // overrides the global dimension
};

struct relation_schema {
  std::string name;
  std::string lhs;
  std::string rhs;
  double weight = 1.0;              // > 0
  std::string operator_ = "none";   // TOML key "operator"
  bool all_negs = false;
};

struct config {
  // entity types in file order ("entities.NAME" tables)
  std::vector<std::pair<std::string, entity_schema>> entities;
  std::vector<relation_schema> relations; // list index = relation id

  // model
  std::int64_t dimension = 0; // required, > 0
  double init_scale = 1e-3;
  std::string operator_init = "identity"; // identity (PBG), random (kbc)
  std::optional<double> max_norm;
  bool global_emb = true;
  std::string comparator = "cos"; // dot, cos, l2, squared_l2
  bool bias = false;
  std::string loss_fn = "ranking"; // ranking, logistic, softmax
  double margin = 0.1;
  double regularization_coef = 0.0;
  std::string regularizer = "N3";
  double query_dropout = 0.0;     // 1-vs-all only (LibKGE's embedder dropout)
  double candidate_dropout = 0.0;
  double query_entity_dropout = 0.0; // 1-vs-all: the query's two factors apart
  double relation_dropout = 0.0;
  std::string all_negs_targets = "one"; // one (1vsAll), known (KvsAll)
  std::string all_negs_precision = "float32"; // float32, bfloat16 (the 1-vs-all products)

  // data
  std::string entity_path;             // required
  std::vector<std::string> edge_paths; // required
  std::string checkpoint_path;         // required
  std::optional<std::string> init_path;
  std::optional<std::int64_t> checkpoint_preservation_interval;

  // training
  std::int64_t num_epochs = 1;
  std::optional<std::int64_t> num_edge_chunks;
  std::int64_t max_edges_per_chunk = 1'000'000'000;
  std::string bucket_order = "inside_out"; // random, affinity, inside_out, outside_in
  std::optional<std::int64_t> workers;
  std::int64_t batch_size = 1000;
  std::int64_t num_batch_negs = 50;
  std::int64_t num_uniform_negs = 50;
  bool disable_lhs_negs = false;
  bool disable_rhs_negs = false;
  double lr = 1e-2;
  std::string entity_optimizer = "row_adagrad"; // row_adagrad (PBG), adagrad (kbc, LibKGE)
  std::optional<double> relation_lr;
  double eval_fraction = 0.05;
  std::optional<std::int64_t> eval_num_batch_negs = 1000;
  std::optional<std::int64_t> eval_num_uniform_negs = 1000;
  bool early_stopping = false;
  bool background_io = false; // deprecated in PBG, accepted and ignored

  // expert
  std::int64_t verbose = 0;
  double hogwild_delay = 2.0;
  bool dynamic_relations = false;

  // distributed
  std::int64_t num_machines = 1;
  std::int64_t num_partition_servers = -1;
  std::optional<std::string> distributed_init_method;
  bool distributed_tree_init_order = true;
  std::int64_t num_groups_for_partition_server = 16;
  std::int64_t num_groups_per_sharded_partition_server = 1;
  std::int64_t partition_shard_size = 250;

  // GPU
  std::int64_t num_gpus = 0;
  bool half_precision = false;

  // abg extensions (not in PBG's schema)
  std::int64_t checkpoint_keep_versions = 2; // committed versions kept on disk (>= 1)
  std::int64_t checkpoint_every_buckets = 0; // also commit after every N buckets of an iteration (0: only at its end)
  std::string checkpoint_mode = "gather";     // or "local": partition servers write their own partitions
  std::int64_t checkpoint_replicas = 0;       // "local": 1 = each partition also on another node
  std::int64_t buffer_capacity = 0;           // partitions a trainer node holds in memory (0: no limit)
  std::string partition_balance = "entities"; // import: equal entity counts, or "edges": and equal edge counts
  std::optional<std::int64_t> seed;          // random when absent; see abg train

  /// The entity schema of `name`, or nullptr.
  const entity_schema* entity(std::string_view name) const;
  /// Dimension of an entity type: its own or the global one.
  std::int64_t dimension_of(std::string_view entity_name) const;
};

/// A config and the non-fatal notes its validation produced (rules PBG only warns about).
struct loaded_config {
  config value;
  std::vector<std::string> warnings;
};

/// Reads a TOML config, applies `-p key=value` overrides (dotted paths, lists
/// comma-separated), and validates everything. On failure the error message
/// lists every problem found, one per line, each naming file:line:column (or
/// the override), the key, what was given and what is expected.
expected<loaded_config> load_config(const std::filesystem::path& file,
                                    const std::vector<std::string>& overrides = {});

/// Same, from TOML text; `source_name` names it in messages.
expected<loaded_config> parse_config(std::string_view toml_text, std::string_view source_name,
                                     const std::vector<std::string>& overrides = {});

/// The effective config as TOML (defaults filled in, "none" defaults absent);
/// parse_config() of the result gives back an equal config.
std::string to_toml(const config& c);

/// Every key with its meaning, expected value and default, grouped by table
/// (the reference `abg config --help` prints).
std::string describe_config_keys();

bool operator==(const entity_schema&, const entity_schema&);
bool operator==(const relation_schema&, const relation_schema&);
bool operator==(const config&, const config&);

} // namespace abg
