// The model's description, torch-free: operator, comparator and loss kinds,
// their names, relations and everything of a config the model needs. Shared
// by the LibTorch model (abg/model/model.h) and the plain scorer
// (abg/model/plain_score.h). Formulas and shapes: docs/model.md.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "abg/config.h"
#include "abg/error.h"

namespace abg::model {

enum class op_kind { none, diagonal, translation, linear, affine, complex_diagonal };
enum class comparator_kind { dot, cos, l2, squared_l2 };
enum class loss_kind { ranking, logistic, softmax };
enum class side { lhs, rhs };
/// N3 as PBG applies it (on the adjusted embeddings of both sides and the
/// operator parameters, once per edge) or as kbc does (per query: the cubed
/// moduli of the positive edge's head, relation and tail factors).
enum class regularizer_kind { n3, n3_kbc };
/// Initial operator parameters: PBG's identity, or kbc's small random values
/// (N(0, 1)·init_scale, as kbc initialises its relation embeddings).
enum class operator_init_kind { identity, random };

expected<op_kind> parse_operator(std::string_view name);
expected<comparator_kind> parse_comparator(std::string_view name);
expected<loss_kind> parse_loss(std::string_view name);
std::string_view to_string(op_kind k);
std::string_view to_string(side s);

/// PBG's parameter names of an operator with their per-relation shapes for
/// dimension d (complex_diagonal: "real", "imag" of d/2 each).
std::vector<std::pair<std::string, std::vector<std::int64_t>>> operator_params(op_kind k, std::int64_t d);

struct relation_desc {
  std::string name;
  std::int64_t lhs_type = 0; // index into model_desc::entity_types
  std::int64_t rhs_type = 0;
  op_kind op = op_kind::none;
  double weight = 1.0;
  bool all_negs = false;
};

/// Everything of a config the model needs.
struct model_desc {
  std::vector<std::string> entity_types; // config order
  std::vector<std::int64_t> dims;        // per entity type
  /// Relation ids. With dynamic relations: num_dynamic_relations copies of the
  /// single config relation (names "{name}" of entry 0, ids 0..R-1).
  std::vector<relation_desc> relations;
  bool dynamic = false;
  comparator_kind comparator = comparator_kind::cos;
  bool bias = false;
  loss_kind loss = loss_kind::ranking;
  double margin = 0.1;
  double regularization_coef = 0.0;
  regularizer_kind regularizer = regularizer_kind::n3;
  /// Dropout of the 1-vs-all training (every relation all_negs): the
  /// fraction of each query's adjusted vector, and of each candidate
  /// entity's, zeroed per batch (the rest scaled by 1/(1 − p)); with
  /// dynamic relations, instead of the query's vector, its entity row and
  /// its operator's parameters apart (LibKGE's).
  double query_dropout = 0.0;
  double candidate_dropout = 0.0;
  double query_entity_dropout = 0.0;
  double relation_dropout = 0.0;
  bool any_dropout() const {
    return query_dropout > 0 || candidate_dropout > 0 || query_entity_dropout > 0 || relation_dropout > 0;
  }
  /// KvsAll (all_negs_targets = "known"): each 1-vs-all query's targets are
  /// all its known answers among the bucket's edges, not only its edge's.
  bool known_targets = false;
  /// all_negs_precision = "bfloat16": the 1-vs-all kernel's products take
  /// bfloat16 inputs (float32 accumulation) where the CPU has AVX512-BF16.
  bool bf16_products = false;
  std::optional<double> max_norm;
  bool global_emb = true;
  double init_scale = 1e-3;
  operator_init_kind operator_init = operator_init_kind::identity;
  std::int64_t num_batch_negs = 50;
  std::int64_t num_uniform_negs = 50;
  bool disable_lhs_negs = false;
  bool disable_rhs_negs = false;
  double lr = 0.01;
  double relation_lr = 0.01;
  /// Entity optimizer: PBG's row-wise Adagrad (a table's state is [count])
  /// or element-wise Adagrad, kbc's and LibKGE's (state [count, dim]).
  bool elementwise_entity_adagrad = false;

  /// Validates the model part of `c` (names, even dimension for
  /// complex_diagonal, equal lhs/rhs dimension per relation). With dynamic
  /// relations `num_dynamic_relations` (from the entity path) is the number of
  /// relation ids; it is ignored otherwise.
  static expected<model_desc> from(const config& c, std::int64_t num_dynamic_relations = 0);

  std::int64_t type_index(std::string_view name) const; // -1 if unknown
  /// Whether relation `r`'s `s` side has an operator (rhs always; lhs only
  /// with dynamic relations).
  bool has_operator(side s) const { return s == side::rhs || dynamic; }
  /// Optimizer state values per row of entity type `type`'s tables.
  std::int64_t state_width(std::int64_t type) const {
    return elementwise_entity_adagrad ? dims[static_cast<std::size_t>(type)] : 1;
  }
};

} // namespace abg::model
