// The model's description, torch-free (see include/abg/model/desc.h).
#include "abg/model/desc.h"

#include <fmt/format.h>

namespace abg::model {

// --- names ----------------------------------------------------------------------------

expected<op_kind> parse_operator(std::string_view name) {
  if (name == "none") return op_kind::none;
  if (name == "diagonal") return op_kind::diagonal;
  if (name == "translation") return op_kind::translation;
  if (name == "linear") return op_kind::linear;
  if (name == "affine") return op_kind::affine;
  if (name == "complex_diagonal") return op_kind::complex_diagonal;
  return fail("unknown operator '{}' (expected none, diagonal, translation, linear, affine, complex_diagonal)", name);
}

expected<comparator_kind> parse_comparator(std::string_view name) {
  if (name == "dot") return comparator_kind::dot;
  if (name == "cos") return comparator_kind::cos;
  if (name == "l2") return comparator_kind::l2;
  if (name == "squared_l2") return comparator_kind::squared_l2;
  return fail("unknown comparator '{}' (expected dot, cos, l2, squared_l2)", name);
}

expected<loss_kind> parse_loss(std::string_view name) {
  if (name == "ranking") return loss_kind::ranking;
  if (name == "logistic") return loss_kind::logistic;
  if (name == "softmax") return loss_kind::softmax;
  return fail("unknown loss_fn '{}' (expected ranking, logistic, softmax)", name);
}

std::string_view to_string(op_kind k) {
  switch (k) {
  case op_kind::none: return "none";
  case op_kind::diagonal: return "diagonal";
  case op_kind::translation: return "translation";
  case op_kind::linear: return "linear";
  case op_kind::affine: return "affine";
  case op_kind::complex_diagonal: return "complex_diagonal";
  }
  return "?";
}

std::string_view to_string(side s) { return s == side::lhs ? "lhs" : "rhs"; }

std::vector<std::pair<std::string, std::vector<std::int64_t>>> operator_params(op_kind k, std::int64_t d) {
  switch (k) {
  case op_kind::none: return {};
  case op_kind::diagonal: return {{"diagonal", {d}}};
  case op_kind::translation: return {{"translation", {d}}};
  case op_kind::linear: return {{"linear_transformation", {d, d}}};
  case op_kind::affine: return {{"linear_transformation", {d, d}}, {"translation", {d}}};
  case op_kind::complex_diagonal: return {{"real", {d / 2}}, {"imag", {d / 2}}};
  }
  return {};
}

// --- description ------------------------------------------------------------------------

std::int64_t model_desc::type_index(std::string_view name) const {
  for (std::size_t i = 0; i < entity_types.size(); ++i)
    if (entity_types[i] == name) return static_cast<std::int64_t>(i);
  return -1;
}

expected<model_desc> model_desc::from(const config& c, std::int64_t num_dynamic_relations) {
  model_desc m;
  for (const auto& [name, schema] : c.entities) {
    (void)schema;
    m.entity_types.push_back(name);
    m.dims.push_back(c.dimension_of(name));
  }
  auto cmp = parse_comparator(c.comparator);
  if (!cmp) return std::unexpected(cmp.error());
  auto lf = parse_loss(c.loss_fn);
  if (!lf) return std::unexpected(lf.error());
  if (c.regularizer != "N3" && c.regularizer != "N3_kbc")
    return fail("unknown regularizer '{}' (expected N3 or N3_kbc)", c.regularizer);
  m.regularizer = c.regularizer == "N3_kbc" ? regularizer_kind::n3_kbc : regularizer_kind::n3;
  m.comparator = *cmp;
  m.loss = *lf;
  m.bias = c.bias;
  m.margin = c.margin;
  m.regularization_coef = c.regularization_coef;
  m.max_norm = c.max_norm;
  m.global_emb = c.global_emb;
  m.init_scale = c.init_scale;
  if (c.operator_init != "identity" && c.operator_init != "random")
    return fail("unknown operator_init '{}' (expected identity or random)", c.operator_init);
  m.operator_init = c.operator_init == "random" ? operator_init_kind::random : operator_init_kind::identity;
  m.num_batch_negs = c.num_batch_negs;
  m.num_uniform_negs = c.num_uniform_negs;
  m.disable_lhs_negs = c.disable_lhs_negs;
  m.disable_rhs_negs = c.disable_rhs_negs;
  m.lr = c.lr;
  m.relation_lr = c.relation_lr.value_or(c.lr);
  if (c.entity_optimizer != "row_adagrad" && c.entity_optimizer != "adagrad")
    return fail("unknown entity_optimizer '{}' (expected row_adagrad or adagrad)", c.entity_optimizer);
  m.elementwise_entity_adagrad = c.entity_optimizer == "adagrad";
  m.dynamic = c.dynamic_relations;
  if (m.disable_lhs_negs && m.disable_rhs_negs) return fail("disable_lhs_negs and disable_rhs_negs are both set");
  if (m.dynamic && c.relations.size() != 1)
    return fail("dynamic_relations needs exactly one relation entry, got {}", c.relations.size());
  for (std::size_t i = 0; i < c.relations.size(); ++i) {
    const auto& r = c.relations[i];
    relation_desc d;
    d.name = r.name;
    d.lhs_type = m.type_index(r.lhs);
    d.rhs_type = m.type_index(r.rhs);
    if (d.lhs_type < 0 || d.rhs_type < 0)
      return fail("relation '{}' refers to an unknown entity type ('{}' / '{}')", r.name, r.lhs, r.rhs);
    auto op = parse_operator(r.operator_);
    if (!op) return fail("relation '{}': {}", r.name, op.error().message);
    d.op = *op;
    d.weight = r.weight;
    d.all_negs = r.all_negs;
    const auto dl = m.dims[static_cast<std::size_t>(d.lhs_type)];
    const auto dr = m.dims[static_cast<std::size_t>(d.rhs_type)];
    if (dl != dr)
      return fail("relation '{}': lhs type '{}' has dimension {} but rhs type '{}' has {}; they must be equal",
                  r.name, r.lhs, dl, r.rhs, dr);
    if (d.op == op_kind::complex_diagonal && dr % 2 != 0)
      return fail("relation '{}': operator complex_diagonal needs an even dimension, got {}", r.name, dr);
    m.relations.push_back(std::move(d));
  }
  for (const auto& [key, p] :
       {std::pair{"query_dropout", c.query_dropout}, {"candidate_dropout", c.candidate_dropout},
        {"query_entity_dropout", c.query_entity_dropout}, {"relation_dropout", c.relation_dropout}}) {
    if (!(p >= 0.0 && p < 1.0)) return fail("{} = {}: expected a fraction in [0, 1)", key, p);
    if (p == 0.0) continue;
    for (const auto& r : c.relations)
      if (!r.all_negs)
        return fail("{} = {} applies to 1-vs-all training only, and relation '{}' has no all_negs; set all_negs = "
                    "true on every relation or {} = 0",
                    key, p, r.name, key);
  }
  for (const auto& [key, p] :
       {std::pair{"query_entity_dropout", c.query_entity_dropout}, {"relation_dropout", c.relation_dropout}}) {
    if (p == 0.0) continue;
    // The query's factors are apart only where the query carries the operator.
    // Without dynamic relations the tail queries do not: the rhs operator sits
    // on the candidates, and moves onto the query (conjugated) only where that
    // keeps every score, h·(r∘t) = (r̄∘h)·t.
    if (!c.dynamic_relations) {
      if (m.comparator != comparator_kind::dot || m.bias)
        return fail("{} = {} without dynamic_relations needs comparator = \"dot\" and bias = false (the relation's "
                    "operator moves onto the tail queries, which keeps the scores only for a plain dot product); "
                    "set dynamic_relations = true or use query_dropout",
                    key, p);
      for (const auto& r : m.relations)
        if (r.op != op_kind::none && r.op != op_kind::diagonal && r.op != op_kind::complex_diagonal)
          return fail("{} = {} without dynamic_relations: relation '{}' has operator '{}', which cannot move onto "
                      "the tail queries (none, diagonal and complex_diagonal can); set dynamic_relations = true or "
                      "use query_dropout",
                      key, p, r.name, to_string(r.op));
    }
    if (c.query_dropout > 0.0)
      return fail("{} = {} and query_dropout = {} both drop the query; set one of them to 0", key, p,
                  c.query_dropout);
  }
  m.query_dropout = c.query_dropout;
  m.candidate_dropout = c.candidate_dropout;
  m.query_entity_dropout = c.query_entity_dropout;
  m.relation_dropout = c.relation_dropout;
  if (c.all_negs_targets != "one" && c.all_negs_targets != "known")
    return fail("unknown all_negs_targets '{}' (expected one or known)", c.all_negs_targets);
  m.known_targets = c.all_negs_targets == "known";
  if (m.known_targets) {
    for (const auto& r : c.relations)
      if (!r.all_negs)
        return fail("all_negs_targets = \"known\" applies to 1-vs-all training only, and relation '{}' has no "
                    "all_negs; set all_negs = true on every relation or all_negs_targets = \"one\"",
                    r.name);
    if (m.loss == loss_kind::ranking)
      return fail("all_negs_targets = \"known\" (KvsAll) trains with loss_fn softmax or logistic, not ranking");
  }
  if (c.all_negs_precision != "float32" && c.all_negs_precision != "bfloat16")
    return fail("unknown all_negs_precision '{}' (expected float32 or bfloat16)", c.all_negs_precision);
  m.bf16_products = c.all_negs_precision == "bfloat16";
  if (m.bf16_products)
    for (const auto& r : c.relations)
      if (!r.all_negs)
        return fail("all_negs_precision = \"bfloat16\" applies to 1-vs-all training only, and relation '{}' has no "
                    "all_negs; set all_negs = true on every relation or all_negs_precision = \"float32\"",
                    r.name);
  if (m.dynamic) {
    if (num_dynamic_relations <= 0)
      return fail("dynamic_relations = true needs the number of relation types (dynamic_rel_count), got {}",
                  num_dynamic_relations);
    auto base = m.relations[0];
    m.relations.assign(static_cast<std::size_t>(num_dynamic_relations), base);
  }
  return m;
}

} // namespace abg::model
