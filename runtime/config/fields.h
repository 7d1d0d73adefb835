// The one table of config keys. Parsing, validation, printing, equality and
// the key reference (--help) all walk it, so a key is added in one place.
#pragma once

#include <array>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <variant>

#include "abg/config.h"

namespace abg::config_detail {

/// Range rule a value must satisfy (PBG's validators, plus the ones abg adds).
enum class rule { any, positive, non_negative, fraction, at_least_minus_one, non_empty };

template <class S>
using member =
  std::variant<std::int64_t S::*, double S::*, bool S::*, std::string S::*,
               std::vector<std::string> S::*, std::optional<std::int64_t> S::*,
               std::optional<double> S::*, std::optional<std::string> S::*>;

/// One key of a TOML table (top level, [entities.NAME] or [[relations]]).
template <class S>
struct field {
  std::string_view name;
  member<S> ptr;
  std::string_view help;
  rule check = rule::any;
  std::span<const std::string_view> choices = {}; // non-empty: an enum
  bool is_required = false;
  std::string_view section = {}; // starts a group in printed output
  bool is_extension = false;     // abg-only, not in PBG's schema

  constexpr field with(rule r) const { auto f = *this; f.check = r; return f; }
  constexpr field one_of(std::span<const std::string_view> c) const {
    auto f = *this;
    f.choices = c;
    return f;
  }
  constexpr field required() const { auto f = *this; f.is_required = true; return f; }
  constexpr field starts(std::string_view s) const { auto f = *this; f.section = s; return f; }
  constexpr field extension() const { auto f = *this; f.is_extension = true; return f; }
};

template <class S>
constexpr field<S> key(std::string_view name, member<S> ptr, std::string_view help) {
  return {.name = name, .ptr = ptr, .help = help};
}

template <class T>
struct unwrap_optional {
  using type = T;
};
template <class T>
struct unwrap_optional<std::optional<T>> {
  using type = T;
};
template <class Ptr>
struct member_traits;
template <class S, class M>
struct member_traits<M S::*> {
  using type = typename unwrap_optional<M>::type;
};
/// The value type a member pointer stores, std::optional removed.
template <class Ptr>
using value_of = typename member_traits<Ptr>::type;

enum class kind { integer, number, boolean, string, strings };

template <class T>
constexpr kind kind_of() {
  if constexpr (std::is_same_v<T, std::int64_t>)
    return kind::integer;
  else if constexpr (std::is_same_v<T, double>)
    return kind::number;
  else if constexpr (std::is_same_v<T, bool>)
    return kind::boolean;
  else if constexpr (std::is_same_v<T, std::string>)
    return kind::string;
  else
    return kind::strings;
}

inline constexpr std::string_view comparators[] = {"dot", "cos", "l2", "squared_l2"};
inline constexpr std::string_view loss_fns[] = {"ranking", "logistic", "softmax"};
inline constexpr std::string_view regularizers[] = {"N3", "N3_kbc"};
inline constexpr std::string_view operator_inits[] = {"identity", "random"};
inline constexpr std::string_view entity_optimizers[] = {"row_adagrad", "adagrad"};
inline constexpr std::string_view all_negs_targets[] = {"one", "known"};
inline constexpr std::string_view all_negs_precisions[] = {"float32", "bfloat16"};
inline constexpr std::string_view operators[] = {"none",   "diagonal", "translation",
                                                 "linear", "affine",   "complex_diagonal"};
inline constexpr std::string_view bucket_orders[] = {"random", "affinity", "inside_out",
                                                     "outside_in", "buffer"};
inline constexpr std::string_view checkpoint_modes[] = {"gather", "local"};
inline constexpr std::string_view partition_balances[] = {"entities", "edges"};

using enum rule;

inline constexpr auto entity_fields = std::to_array<field<entity_schema>>({
  key<entity_schema>("num_partitions", &entity_schema::num_partitions,
                     "partitions of this type (1 = unpartitioned)")
    .with(positive)
    .required(),
  key<entity_schema>("featurized", &entity_schema::featurized,
                     "entities are sets of features (PBG's featurized entities)"),
  key<entity_schema>("dimension", &entity_schema::dimension,
                     "embedding dimension of this type (default: the global dimension)")
    .with(positive),
});

inline constexpr auto relation_fields = std::to_array<field<relation_schema>>({
  key<relation_schema>("name", &relation_schema::name, "relation type name (for logs and output)")
    .with(non_empty)
    .required(),
  key<relation_schema>("lhs", &relation_schema::lhs, "entity type of the left-hand side")
    .with(non_empty)
    .required(),
  key<relation_schema>("rhs", &relation_schema::rhs, "entity type of the right-hand side")
    .with(non_empty)
    .required(),
  key<relation_schema>("weight", &relation_schema::weight,
                       "multiplies the loss of this relation's edges")
    .with(positive),
  key<relation_schema>("operator", &relation_schema::operator_,
                       "transformation applied to one side (both with dynamic relations) "
                       "before comparing")
    .one_of(operators),
  key<relation_schema>("all_negs", &relation_schema::all_negs,
                       "use every entity of the partition as a negative"),
});

inline constexpr auto config_fields = std::to_array<field<config>>({
  key<config>("entity_path", &config::entity_path,
              "directory of the entity dictionaries and counts (written by abg import)")
    .required()
    .starts("data"),
  key<config>("edge_paths", &config::edge_paths,
              "edge directories (one per imported input file), trained in order each epoch")
    .required(),
  key<config>("checkpoint_path", &config::checkpoint_path,
              "directory of checkpoints; training resumes from one found there")
    .required(),
  key<config>("init_path", &config::init_path,
              "directory with initial embeddings for some entity types"),
  key<config>("checkpoint_preservation_interval", &config::checkpoint_preservation_interval,
              "archive a snapshot of the checkpoint every this many epochs")
    .with(positive),

  key<config>("dimension", &config::dimension,
              "embedding dimension (an entity type may override it)")
    .with(positive)
    .required()
    .starts("model"),
  key<config>("init_scale", &config::init_scale,
              "standard deviation of the initial embeddings, N(0, 1) * init_scale")
    .with(positive),
  key<config>("operator_init", &config::operator_init,
              "initial operator parameters: identity (PBG's: a relation starts as no change) or random "
              "(kbc's: N(0, 1) * init_scale, like the embeddings)")
    .one_of(operator_inits),
  key<config>("max_norm", &config::max_norm, "rescale embeddings whose L2 norm exceeds this")
    .with(positive),
  key<config>("global_emb", &config::global_emb,
              "learn one vector per entity type, added to each of its embeddings"),
  key<config>("comparator", &config::comparator,
              "how the two adjusted sides of an edge are scored")
    .one_of(comparators),
  key<config>("bias", &config::bias,
              "coordinate 0 of each embedding is a bias added to the score"),
  key<config>("loss_fn", &config::loss_fn, "loss over positive and negative scores")
    .one_of(loss_fns),
  key<config>("margin", &config::margin, "margin of the ranking loss"),
  key<config>("regularization_coef", &config::regularization_coef,
              "weight of the regularizer (0: off)")
    .with(non_negative),
  key<config>("regularizer", &config::regularizer,
              "N3 (PBG's): coef * sum of |x|^3 over the adjusted embeddings of both sides and the operator "
              "parameters, per edge (moduli of complex pairs under complex_diagonal); N3_kbc (kbc's N3): per query, the cubed moduli of the positive edge's "
              "head, relation and tail factors")
    .one_of(regularizers),
  key<config>("query_dropout", &config::query_dropout,
              "1-vs-all (all_negs on every relation): fraction of each query's adjusted vector (the "
              "entity under the relation's operator) zeroed per batch, the rest scaled by 1/(1 - p); "
              "their product, where LibKGE's entity_embedder.dropout and relation_embedder.dropout drop "
              "the two apart (see query_entity_dropout, relation_dropout)")
    .with(fraction),
  key<config>("candidate_dropout", &config::candidate_dropout,
              "1-vs-all: fraction of each candidate entity's vector zeroed per batch, the true one's as "
              "well; LibKGE's entity_embedder.dropout on the scored entities")
    .with(fraction),
  key<config>("query_entity_dropout", &config::query_entity_dropout,
              "1-vs-all: fraction of each query entity's row zeroed per batch before the relation's "
              "operator, the rest scaled by 1/(1 - p); LibKGE's entity_embedder.dropout on the query's "
              "entity (excludes query_dropout; without dynamic_relations: comparator dot and operators "
              "none, diagonal, complex_diagonal, whose rhs operator moves onto the tail queries)")
    .with(fraction),
  key<config>("relation_dropout", &config::relation_dropout,
              "1-vs-all: fraction of each query's operator parameters zeroed per batch, the rest scaled "
              "by 1/(1 - p); LibKGE's relation_embedder.dropout (excludes query_dropout; without "
              "dynamic_relations as query_entity_dropout)")
    .with(fraction),
  key<config>("all_negs_targets", &config::all_negs_targets,
              "1-vs-all: one (1vsAll: each query's target is its edge's entity) or known (LibKGE's KvsAll: "
              "every entity that answers the query among the bucket's training edges is a target, and each "
              "edge's query weighs 1/k, k the answers; softmax and logistic loss)")
    .one_of(all_negs_targets),
  key<config>("all_negs_precision", &config::all_negs_precision,
              "1-vs-all: float32, or bfloat16: the products of queries and candidates (scores, and the "
              "gradients back to both) take bfloat16 inputs and accumulate in float32, as PyTorch's "
              "autocast(dtype=torch.bfloat16) does; embeddings, optimizer state and evaluation stay "
              "float32. On a CPU with AVX512-BF16 (elsewhere float32); WN18RR epochs took 17.7 s instead of 38-40 s")
    .one_of(all_negs_precisions),

  key<config>("num_epochs", &config::num_epochs, "passes over all edges")
    .with(non_negative)
    .starts("training"),
  key<config>("num_edge_chunks", &config::num_edge_chunks,
              "parts each bucket is split into (default: so none exceeds max_edges_per_chunk)")
    .with(positive),
  key<config>("max_edges_per_chunk", &config::max_edges_per_chunk,
              "upper bound on a chunk's edges when num_edge_chunks is unset")
    .with(positive),
  key<config>("bucket_order", &config::bucket_order,
              "order of the buckets within a pass (buffer, an abg extension: the fewest partition loads for "
              "buffer_capacity)")
    .one_of(bucket_orders),
  key<config>("workers", &config::workers, "HOGWILD worker threads (default: CPU count)")
    .with(positive),
  key<config>("batch_size", &config::batch_size, "edges per batch").with(positive),
  key<config>("num_batch_negs", &config::num_batch_negs,
              "negatives per positive taken from its batch chunk")
    .with(non_negative),
  key<config>("num_uniform_negs", &config::num_uniform_negs,
              "negatives per positive drawn uniformly from the active partition")
    .with(non_negative),
  key<config>("disable_lhs_negs", &config::disable_lhs_negs,
              "no negatives on the left-hand side"),
  key<config>("disable_rhs_negs", &config::disable_rhs_negs,
              "no negatives on the right-hand side"),
  key<config>("lr", &config::lr, "Adagrad learning rate").with(non_negative),
  key<config>("entity_optimizer", &config::entity_optimizer,
              "optimizer of the entity embeddings: row_adagrad (PBG's: one accumulated squared gradient "
              "per row) or adagrad (kbc's and LibKGE's torch.optim.Adagrad: one per coordinate, d times "
              "the optimizer state)")
    .one_of(entity_optimizers),
  key<config>("relation_lr", &config::relation_lr,
              "learning rate of relation parameters and global embeddings (default: lr)")
    .with(non_negative),

  key<config>("eval_fraction", &config::eval_fraction,
              "fraction of edges held out of training to track evaluation metrics")
    .with(fraction)
    .starts("evaluation during training"),
  key<config>("eval_num_batch_negs", &config::eval_num_batch_negs,
              "batch negatives per positive when evaluating")
    .with(non_negative),
  key<config>("eval_num_uniform_negs", &config::eval_num_uniform_negs,
              "uniform negatives per positive when evaluating")
    .with(non_negative),
  key<config>("early_stopping", &config::early_stopping,
              "stop when the evaluation loss increases"),

  key<config>("background_io", &config::background_io,
              "deprecated in PBG; accepted and ignored")
    .starts("expert"),
  key<config>("verbose", &config::verbose, "logging verbosity (0 or 1)").with(non_negative),
  key<config>("hogwild_delay", &config::hogwild_delay,
              "seconds trainers of rank > 0 wait before each bucket of the first epoch")
    .with(non_negative),
  key<config>("dynamic_relations", &config::dynamic_relations,
              "relation types come from the data; the single [[relations]] entry applies to all"),

  key<config>("num_machines", &config::num_machines, "machines in distributed training")
    .with(positive)
    .starts("distributed"),
  key<config>("num_partition_servers", &config::num_partition_servers,
              "-1: one per trainer; 0: swap through the checkpoint directory; > 0: dedicated")
    .with(at_least_minus_one),
  key<config>("distributed_init_method", &config::distributed_init_method,
              "rendezvous URI of a distributed run (tcp://HOST:PORT, file://PATH)"),
  key<config>("distributed_tree_init_order", &config::distributed_tree_init_order,
              "first epoch: train a bucket only once one of its partitions is initialised"),
  key<config>("num_groups_for_partition_server", &config::num_groups_for_partition_server,
              "communication groups for partition servers")
    .with(positive),
  key<config>("num_groups_per_sharded_partition_server",
              &config::num_groups_per_sharded_partition_server,
              "communication groups per sharded partition server")
    .with(positive),
  key<config>("partition_shard_size", &config::partition_shard_size,
              "size of the shards a partition is split into for partition servers")
    .with(positive),

  key<config>("num_gpus", &config::num_gpus, "GPUs to train on (0: CPU)")
    .with(non_negative)
    .starts("GPU"),
  key<config>("half_precision", &config::half_precision, "half-precision training (GPU only)"),

  key<config>("checkpoint_keep_versions", &config::checkpoint_keep_versions,
              "committed checkpoint versions kept on disk")
    .with(positive)
    .starts("abg extensions")
    .extension(),
  key<config>("checkpoint_every_buckets", &config::checkpoint_every_buckets,
              "also commit a checkpoint mid-iteration after every N buckets trained, once the trainers wrote back "
              "what they hold; bounds what is trained but not committed (0: only at the end of each iteration)")
    .with(non_negative)
    .extension(),
  key<config>("checkpoint_mode", &config::checkpoint_mode,
              "gather: the coordinator's node writes every partition; local: each partition server writes "
              "its own into its node's checkpoint_path")
    .one_of(checkpoint_modes)
    .extension(),
  key<config>("checkpoint_replicas", &config::checkpoint_replicas,
              "checkpoint_mode = local: 1 also keeps each partition's files on the next partition server's node")
    .with(non_negative)
    .extension(),
  key<config>("buffer_capacity", &config::buffer_capacity,
              "partitions (of all partitioned entity types) a trainer node holds in memory; the partition servers "
              "keep the rest on disk under checkpoint_path/partition-store (Marius' partition buffer); 0: no limit, "
              "everything in memory")
    .with(non_negative)
    .extension(),
  key<config>("partition_balance", &config::partition_balance,
              "abg import: entities (PBG: equal entity counts per partition) or edges (equal counts and "
              "balanced edge counts: the most connected entities spread over the partitions)")
    .one_of(partition_balances)
    .extension(),
  key<config>("seed", &config::seed,
              "seed of initialisation, shuffling and negatives (default: random, printed and recorded "
              "in the checkpoint); with workers = 1 a run is reproducible")
    .with(non_negative)
    .extension(),
});

/// The TOML spelling of a value: what to_toml prints and what messages quote.
std::string toml_text(std::int64_t v);
std::string toml_text(double v);
std::string toml_text(bool v);
std::string toml_text(std::string_view v);
std::string toml_text(const std::vector<std::string>& v);
/// A key as TOML writes it: bare when it can be, else quoted.
std::string toml_key(std::string_view name);

/// "a positive integer", "one of dot, cos, l2, squared_l2", ...
std::string expected_text(kind k, rule r, std::span<const std::string_view> choices);

template <class S>
std::string expected_text(const field<S>& f) {
  return std::visit(
    [&](auto ptr) { return expected_text(kind_of<value_of<decltype(ptr)>>(), f.check, f.choices); },
    f.ptr);
}

} // namespace abg::config_detail
