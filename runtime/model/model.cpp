// PBG's model in LibTorch (see include/abg/model/model.h, docs/model.md).
#include "abg/model/model.h"

#include <ATen/CPUGeneratorImpl.h>
#include <cmath>
#include <limits>
#include <random>
#include <set>
#include <stdexcept>

#include <fmt/ranges.h>

namespace abg::model {

namespace {

using torch::indexing::Slice;

torch::Tensor global_of(const torch::Tensor& x, const torch::Tensor& g) { return g.defined() ? x + g : x; }

// prepare(op(x + g)): the adjusted embedding the comparator sees.
torch::Tensor adjust(const model_desc& m, const torch::Tensor& x, const torch::Tensor& g, op_kind k,
                     const std::map<std::string, torch::Tensor>& p) {
  return prepare(m.comparator, m.bias, apply_operator(k, global_of(x, g), p));
}

torch::Tensor cube_sum(const torch::Tensor& x) { return x.abs().pow(3).sum(); }

// kbc's N3 of one factor [B, d]: Σ|v|³, on the moduli of its (re, im) pairs
// when the relation is complex (pow 1.5 of the squares: no sqrt to differentiate at 0).
torch::Tensor factor_cube(const torch::Tensor& v, bool complex) {
  if (!complex) return cube_sum(v);
  const auto h = v.size(-1) / 2;
  return (v.narrow(-1, 0, h).pow(2) + v.narrow(-1, h, h).pow(2)).pow(1.5).sum();
}

torch::Tensor operator_reg(op_kind k, const std::map<std::string, torch::Tensor>& p) {
  if (k == op_kind::none) return {};
  if (k == op_kind::complex_diagonal) {
    return (p.at("real").pow(2) + p.at("imag").pow(2)).sqrt().pow(3).sum();
  }
  torch::Tensor total;
  for (const auto& [name, t] : p) {
    auto s = cube_sum(t);
    total = total.defined() ? total + s : s;
  }
  return total;
}

// Scores of one side: anchors a [B, d] against candidates c [B, d] (positives)
// and against the negatives (prepared neg rows: [C, U, d], or [count, d] for all).
side_scores side_forward(const model_desc& m, const torch::Tensor& cand, const torch::Tensor& anchor,
                         const torch::Tensor& pos, const side_negatives& negs, const torch::Tensor& neg_rows,
                         const torch::Tensor& true_offsets) {
  const std::int64_t b = cand.size(0);
  if (negs.all) {
    auto neg = score_all(m.comparator, m.bias, anchor.unsqueeze(0), neg_rows).squeeze(0); // [B, count]
    if (b > 0) neg = neg.scatter(1, true_offsets.view({-1, 1}), masked_score);
    return {pos, neg};
  }
  const std::int64_t s = negs.chunk;
  const std::int64_t c = (b + s - 1) / s;
  const std::int64_t pad = c * s - b;
  const std::int64_t d = cand.size(1);
  auto padded = [&](const torch::Tensor& x) {
    auto y = pad > 0 ? torch::cat({x, torch::zeros({pad, d}, x.options())}) : x;
    return y.view({c, s, d});
  };
  auto a = padded(anchor);
  torch::Tensor cands;
  if (negs.batch_negs) {
    auto pc = padded(cand);
    cands = neg_rows.defined() && neg_rows.size(1) > 0 ? torch::cat({pc, neg_rows}, 1) : pc;
  } else {
    cands = neg_rows.defined() ? neg_rows : torch::zeros({c, 0, d}, cand.options());
  }
  const std::int64_t n = cands.size(1);
  auto neg = score_all(m.comparator, m.bias, a, cands); // [C, S, N]
  if (negs.batch_negs && n > 0) {
    auto mask = torch::zeros({c, s, n}, torch::kBool);
    mask.index_put_({Slice(), Slice(), Slice(0, s)}, torch::eye(s, torch::kBool).unsqueeze(0));
    if (pad > 0) mask.index_put_({c - 1, Slice(), Slice(s - pad, s)}, true);
    neg = neg.masked_fill(mask, masked_score);
  }
  neg = neg.reshape({c * s, n}).narrow(0, 0, b);
  return {pos, neg};
}

torch::Tensor prepared_negs(const model_desc& m, const torch::Tensor& rows,
                            const torch::Tensor& g, op_kind k, const std::map<std::string, torch::Tensor>& p) {
  if (!rows.defined()) return {};
  return adjust(m, rows, g, k, p);
}

} // namespace

// --- shared parameters --------------------------------------------------------------------

std::string shared_params::stack_key(const model_desc& m, std::int64_t r, side s, std::string_view param) {
  return m.dynamic ? fmt::format("dyn.{}.{}", to_string(s), param) : fmt::format("{}.{}.{}", r, to_string(s), param);
}

namespace {
torch::Tensor identity_init(std::string_view param, const std::vector<std::int64_t>& shape, std::int64_t rows) {
  std::vector<std::int64_t> full{rows};
  full.insert(full.end(), shape.begin(), shape.end());
  if (param == "diagonal" || param == "real") return torch::ones(full);
  if (param == "linear_transformation") return torch::eye(shape[0]).unsqueeze(0).repeat({rows, 1, 1}).contiguous();
  return torch::zeros(full);
}

// kbc's initialisation: N(0, 1)·scale, from a generator seeded by the stack's
// key, so that every process that initialises the model draws the same values.
torch::Tensor random_init(const std::string& key, const std::vector<std::int64_t>& shape, std::int64_t rows,
                          double scale) {
  std::vector<std::int64_t> full{rows};
  full.insert(full.end(), shape.begin(), shape.end());
  std::uint64_t h = 14695981039346656037ull; // FNV-1a
  for (unsigned char ch : key) h = (h ^ ch) * 1099511628211ull;
  std::mt19937_64 rng(h);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  auto t = torch::empty(full);
  float* out = t.data_ptr<float>();
  for (std::int64_t i = 0; i < t.numel(); ++i) out[i] = normal(rng) * static_cast<float>(scale);
  return t;
}
} // namespace

shared_params shared_params::init(const model_desc& m) {
  shared_params p;
  if (m.global_emb) {
    for (std::size_t t = 0; t < m.entity_types.size(); ++t) {
      auto name = storage::global_embedding_name(m.entity_types[t]);
      p.values[name] = torch::zeros({m.dims[t]});
      p.adagrad[name] = torch::zeros({m.dims[t]});
    }
  }
  const auto num_rel = static_cast<std::int64_t>(m.relations.size());
  for (std::int64_t r = 0; r < num_rel; ++r) {
    const auto& rel = m.relations[static_cast<std::size_t>(r)];
    for (side s : {side::lhs, side::rhs}) {
      if (!m.has_operator(s)) continue;
      const auto d = m.dims[static_cast<std::size_t>(s == side::lhs ? rel.lhs_type : rel.rhs_type)];
      for (const auto& [param, shape] : operator_params(rel.op, d)) {
        auto key = stack_key(m, r, s, param);
        if (!p.stacks.contains(key)) {
          const std::int64_t rows = m.dynamic ? num_rel : 1;
          p.stacks[key] = m.operator_init == operator_init_kind::random ? random_init(key, shape, rows, m.init_scale)
                                                                        : identity_init(param, shape, rows);
          p.stack_adagrad[key] = torch::zeros_like(p.stacks[key]);
        }
        auto name = storage::relation_param_name(r, to_string(s), param);
        const auto row = stack_row(m, r);
        p.values[name] = p.stacks[key][row];
        p.adagrad[name] = p.stack_adagrad[key][row];
        p.views[name] = {key, row};
      }
    }
  }
  return p;
}

storage::shared_tensors shared_params::to_checkpoint() const {
  storage::shared_tensors out;
  auto put = [&](const std::string& name, const torch::Tensor& t) {
    auto c = t.detach().to(torch::kFloat).contiguous();
    (void)out.add(name, c.sizes().vec(),
                  std::span<const float>(c.data_ptr<float>(), static_cast<std::size_t>(c.numel())));
  };
  for (const auto& [name, t] : values) put(name, t);
  for (const auto& [name, t] : adagrad) put(storage::optimizer_state_name(name), t);
  return out;
}

expected<std::int64_t> shared_params::load(const storage::shared_tensors& t, bool fresh_new_relations) {
  torch::NoGradGuard no_grad;
  // Relation ids (rows of the stacks) are fresh from the first id none of
  // whose parameters the checkpoint has, provided it has none after it.
  std::int64_t first_fresh = std::numeric_limits<std::int64_t>::max();
  if (fresh_new_relations) {
    std::int64_t last_present = -1, first_missing = first_fresh;
    for (const auto& [name, view] : views) {
      if (t.find(name) != nullptr)
        last_present = std::max(last_present, view.second);
      else
        first_missing = std::min(first_missing, view.second);
    }
    if (first_missing != first_fresh && first_missing < last_present)
      return fail("the checkpoint has no parameters for relation id {} but has them for relation id {}: it is not an "
                  "earlier state of this model's relation types",
                  first_missing, last_present);
    first_fresh = first_missing;
  }
  auto copy = [&](const std::string& name, torch::Tensor& dst, bool required) -> expected<void> {
    const auto* e = t.find(name);
    if (e == nullptr) {
      if (auto v = views.find(name); v != views.end() && v->second.second >= first_fresh) return {};
      if (required) return fail("shared parameter '{}' is missing from the checkpoint", name);
      return {};
    }
    if (e->shape != dst.sizes().vec())
      return fail("shared parameter '{}' has shape [{}] in the checkpoint, the model expects [{}]", name,
                  fmt::join(e->shape, ", "), fmt::join(dst.sizes().vec(), ", "));
    auto v = t.values(*e);
    dst.copy_(torch::from_blob(const_cast<float*>(v.data()), dst.sizes(), torch::kFloat));
    return {};
  };
  for (auto& [name, dst] : values)
    if (auto r = copy(name, dst, true); !r) return std::unexpected(r.error());
  for (auto& [name, dst] : adagrad)
    if (auto r = copy(storage::optimizer_state_name(name), dst, false); !r) return std::unexpected(r.error());
  std::set<std::int64_t> fresh;
  for (const auto& [name, view] : views)
    if (view.second >= first_fresh) fresh.insert(view.second);
  return static_cast<std::int64_t>(fresh.size());
}

shared_params shared_params::clone() const {
  shared_params p;
  p.views = views;
  for (const auto& [k, t] : stacks) p.stacks[k] = t.clone();
  for (const auto& [k, t] : stack_adagrad) p.stack_adagrad[k] = t.clone();
  for (const auto& [name, t] : values) {
    auto it = views.find(name);
    p.values[name] = it != views.end() ? p.stacks[it->second.first][it->second.second] : t.clone();
  }
  for (const auto& [name, t] : adagrad) {
    auto it = views.find(name);
    p.adagrad[name] = it != views.end() ? p.stack_adagrad[it->second.first][it->second.second] : t.clone();
  }
  return p;
}

table init_table(std::int64_t count, std::int64_t dim, double init_scale, std::uint64_t seed,
                 std::int64_t state_width) {
  auto gen = at::detail::createCPUGenerator(seed);
  table t = allocate_table(count, dim, state_width);
  t.embeddings.normal_(0.0, 1.0, gen).mul_(init_scale);
  t.state.zero_();
  return t;
}

// --- building blocks -----------------------------------------------------------------------

torch::Tensor apply_operator(op_kind k, const torch::Tensor& x, const std::map<std::string, torch::Tensor>& p) {
  switch (k) {
  case op_kind::none: return x;
  case op_kind::diagonal: return x * p.at("diagonal");
  case op_kind::translation: return x + p.at("translation");
  case op_kind::linear:
  case op_kind::affine: {
    const auto& a = p.at("linear_transformation");
    torch::Tensor y = a.size(0) == 1 ? x.matmul(a.squeeze(0).t()) : torch::bmm(a, x.unsqueeze(-1)).squeeze(-1);
    return k == op_kind::affine ? y + p.at("translation") : y;
  }
  case op_kind::complex_diagonal: {
    const auto h = x.size(-1) / 2;
    auto re = x.narrow(-1, 0, h), im = x.narrow(-1, h, h);
    const auto& r = p.at("real");
    const auto& m = p.at("imag");
    return torch::cat({re * r - im * m, re * m + im * r}, -1);
  }
  }
  return x;
}

torch::Tensor prepare(comparator_kind c, bool bias, const torch::Tensor& x) {
  if (c != comparator_kind::cos) return x;
  auto norm = [](const torch::Tensor& y) { return y / y.norm(2, -1, true).clamp_min(1e-12); };
  if (!bias) return norm(x);
  return torch::cat({x.narrow(-1, 0, 1), norm(x.narrow(-1, 1, x.size(-1) - 1))}, -1);
}

torch::Tensor score_pairs(comparator_kind c, bool bias, const torch::Tensor& a, const torch::Tensor& b) {
  if (bias) {
    const auto d = a.size(-1) - 1;
    return score_pairs(c, false, a.narrow(-1, 1, d), b.narrow(-1, 1, d)) + a.select(-1, 0) + b.select(-1, 0);
  }
  switch (c) {
  case comparator_kind::dot:
  case comparator_kind::cos: return (a * b).sum(-1);
  case comparator_kind::squared_l2: return -(a - b).pow(2).sum(-1);
  case comparator_kind::l2: return -(a - b).pow(2).sum(-1).clamp_min(1e-30).sqrt();
  }
  return {};
}

torch::Tensor score_all(comparator_kind c, bool bias, const torch::Tensor& a, const torch::Tensor& n) {
  if (bias) {
    const auto d = a.size(-1) - 1;
    auto base = score_all(c, false, a.narrow(-1, 1, d), n.narrow(-1, 1, d));
    auto nb = n.select(-1, 0);                   // [C, N] or [N]
    if (nb.dim() == 2) nb = nb.unsqueeze(1);     // [C, 1, N]
    return base + a.select(-1, 0).unsqueeze(-1) + nb;
  }
  torch::Tensor dot = n.dim() == 3 ? torch::bmm(a, n.transpose(1, 2)) : a.matmul(n.t());
  if (c == comparator_kind::dot || c == comparator_kind::cos) return dot;
  auto an = a.pow(2).sum(-1, true);                         // [C, S, 1]
  auto nn = n.pow(2).sum(-1);                               // [C, N] or [N]
  if (nn.dim() == 2) nn = nn.unsqueeze(1);
  auto sq = an + nn - 2 * dot;
  if (c == comparator_kind::squared_l2) return -sq;
  return -sq.clamp_min(1e-30).sqrt();
}

torch::Tensor loss(loss_kind k, double margin, const torch::Tensor& pos, const torch::Tensor& neg,
                   const torch::Tensor& weight, const torch::Tensor& known) {
  const auto b = pos.size(0);
  const auto n = neg.size(-1);
  if (b == 0 || n == 0) return torch::zeros({}, pos.options());
  auto w = weight.defined() ? weight.to(pos.scalar_type()) : torch::ones({b}, pos.options());
  if (known.defined()) {
    const auto y = known.to(pos.scalar_type());
    const auto inv_k = 1.0 / (1.0 + y.sum(1));
    const auto wk = w * inv_k;
    if (k == loss_kind::softmax) {
      auto logits = torch::cat({pos.unsqueeze(1), neg}, 1);
      return ((torch::logsumexp(logits, 1) - (pos + (y * neg).sum(1)) * inv_k) * wk).sum();
    }
    if (k == loss_kind::logistic) {
      auto pl = torch::softplus(-pos) + (y * torch::softplus(-neg)).sum(1);
      auto nl = ((1.0 - y) * torch::softplus(neg)).sum(1) / static_cast<double>(n);
      return ((pl + nl) * wk).sum();
    }
    throw std::logic_error("KvsAll targets with the ranking loss (model_desc::from refuses them)");
  }
  switch (k) {
  case loss_kind::ranking:
    return ((margin - pos.unsqueeze(1) + neg).clamp_min(0) * w.unsqueeze(1)).sum();
  case loss_kind::logistic: {
    auto pl = (torch::softplus(-pos) * w).sum();
    auto nl = (torch::softplus(neg) * w.unsqueeze(1)).sum();
    return pl + nl / static_cast<double>(n);
  }
  case loss_kind::softmax: {
    auto logits = torch::cat({pos.unsqueeze(1), neg}, 1);
    return ((torch::logsumexp(logits, 1) - pos) * w).sum();
  }
  }
  return {};
}

// --- negatives and forward ------------------------------------------------------------------

side_negatives draw_negatives(const model_desc& m, side s, std::int64_t b, std::int64_t count, bool all_negs,
                              std::mt19937_64& rng, std::optional<std::int64_t> chunk,
                              std::optional<std::int64_t> num_uniform) {
  side_negatives n;
  n.enabled = s == side::lhs ? !m.disable_lhs_negs : !m.disable_rhs_negs;
  if (!n.enabled) return n;
  if (all_negs) {
    n.all = true;
    return n;
  }
  const auto bn = chunk.value_or(m.num_batch_negs);
  n.batch_negs = bn > 0;
  n.chunk = std::max<std::int64_t>(1, bn > 0 ? bn : b);
  const auto c = (b + n.chunk - 1) / n.chunk;
  const auto u = count > 0 ? num_uniform.value_or(m.num_uniform_negs) : 0;
  n.uniform = torch::empty({c, u}, torch::kLong);
  auto* p = n.uniform.data_ptr<std::int64_t>();
  if (u > 0) {
    std::uniform_int_distribution<std::int64_t> dist(0, count - 1);
    for (std::int64_t i = 0; i < c * u; ++i) p[i] = dist(rng);
  }
  return n;
}

forward_result forward(const model_desc& m, const forward_inputs& in, const side_negatives& lhs_neg,
                       const side_negatives& rhs_neg, const torch::Tensor& lhs_offsets,
                       const torch::Tensor& rhs_offsets) {
  forward_result out;
  const std::map<std::string, torch::Tensor> none;
  // candidates of each side: prepared embeddings the negatives replace
  torch::Tensor reg;
  auto add_reg = [&](const torch::Tensor& t) {
    if (t.defined()) reg = reg.defined() ? reg + t : t;
  };
  const bool do_reg = m.regularization_coef != 0.0 && m.regularizer == regularizer_kind::n3;
  if (m.regularization_coef != 0.0 && m.regularizer == regularizer_kind::n3_kbc) {
    // Per query (loss side): the positive edge's head and tail embeddings and
    // the relation's operator of that query (dynamic relations: the lhs
    // operator for rhs queries, the rhs one for lhs queries).
    const bool complex = in.rhs_kind == op_kind::complex_diagonal;
    auto ex = global_of(in.lhs_rows, in.lhs_global), ey = global_of(in.rhs_rows, in.rhs_global);
    auto entities = factor_cube(ex, complex) + factor_cube(ey, complex);
    // without dynamic relations the batch shares one operator: once per query
    auto per_query = [&](const torch::Tensor& t) {
      return m.dynamic || !t.defined() ? t : t * static_cast<double>(in.lhs_rows.size(0));
    };
    if (lhs_neg.enabled) {
      add_reg(entities);
      add_reg(per_query(operator_reg(in.rhs_kind, in.rhs_op)));
    }
    if (rhs_neg.enabled) {
      add_reg(entities);
      add_reg(m.dynamic ? operator_reg(in.lhs_kind, in.lhs_op) : per_query(operator_reg(in.rhs_kind, in.rhs_op)));
    }
  }
  // One loss side: the candidates `cand` (the positive one per edge, and
  // `nr`, the negatives) against the queries `anchor`, through the dropout masks.
  auto scored_side = [&](const torch::Tensor& cand, const torch::Tensor& anchor, const torch::Tensor& pos,
                         const side_negatives& negs, const torch::Tensor& nr, const torch::Tensor& offsets,
                         const torch::Tensor& query_mask, const torch::Tensor& candidate_mask) {
    if (!query_mask.defined() && !candidate_mask.defined())
      return side_forward(m, cand, anchor, pos, negs, nr, offsets);
    auto a = query_mask.defined() ? anchor * query_mask : anchor;
    auto c = candidate_mask.defined() ? cand * candidate_mask.index_select(0, offsets) : cand;
    auto n = candidate_mask.defined() ? nr * candidate_mask : nr;
    return side_forward(m, c, a, score_pairs(m.comparator, m.bias, c, a), negs, n, offsets);
  };
  // a loss side's queries, with their entity rows and operator parameters
  // dropped apart; `conjugate`: the operator's imaginary part negated
  auto query = [&](const torch::Tensor& plain, const torch::Tensor& rows, const torch::Tensor& global, op_kind kind,
                   const std::map<std::string, torch::Tensor>& op, const torch::Tensor& entity_mask,
                   const std::map<std::string, torch::Tensor>& op_mask, bool conjugate = false) {
    if (!entity_mask.defined()) return plain;
    auto dropped = op;
    for (auto& [name, t] : dropped) t = t * op_mask.at(name);
    if (conjugate && kind == op_kind::complex_diagonal) dropped.at("imag") = -dropped.at("imag");
    return adjust(m, rows * entity_mask, global, kind, dropped);
  };
  if (!m.dynamic) {
    auto xa = adjust(m, in.lhs_rows, in.lhs_global, op_kind::none, none);
    auto yb = adjust(m, in.rhs_rows, in.rhs_global, in.rhs_kind, in.rhs_op);
    auto pos = score_pairs(m.comparator, m.bias, xa, yb);
    if (lhs_neg.enabled) {
      auto q = query(yb, in.rhs_rows, in.rhs_global, in.rhs_kind, in.rhs_op, in.lhs_query_entity_mask,
                     in.lhs_query_op_mask);
      auto nr = prepared_negs(m, in.lhs_neg_rows, in.lhs_global, op_kind::none, none);
      out.lhs = scored_side(xa, q, q.is_same(yb) ? pos : score_pairs(m.comparator, m.bias, xa, q), lhs_neg, nr,
                            lhs_offsets, in.lhs_query_mask, in.lhs_candidate_mask);
    }
    if (rhs_neg.enabled && in.rhs_query_entity_mask.defined()) {
      // factor dropout: the operator moves onto the tail queries, r̄∘h against
      // plain tails (the same scores for dot, which model_desc requires here)
      auto q = query(xa, in.lhs_rows, in.lhs_global, in.rhs_kind, in.rhs_op, in.rhs_query_entity_mask,
                     in.rhs_query_op_mask, true);
      auto y = adjust(m, in.rhs_rows, in.rhs_global, op_kind::none, none);
      auto nr = prepared_negs(m, in.rhs_neg_rows, in.rhs_global, op_kind::none, none);
      out.rhs = scored_side(y, q, score_pairs(m.comparator, m.bias, y, q), rhs_neg, nr, rhs_offsets,
                            in.rhs_query_mask, in.rhs_candidate_mask);
    } else if (rhs_neg.enabled) {
      auto nr = prepared_negs(m, in.rhs_neg_rows, in.rhs_global, in.rhs_kind, in.rhs_op);
      out.rhs = scored_side(yb, xa, pos, rhs_neg, nr, rhs_offsets, in.rhs_query_mask, in.rhs_candidate_mask);
    }
    if (do_reg) {
      // PBG's N3 takes moduli of both sides when the operator is complex
      const bool complex = in.rhs_kind == op_kind::complex_diagonal;
      add_reg(factor_cube(xa, complex));
      add_reg(factor_cube(yb, complex));
      add_reg(operator_reg(in.rhs_kind, in.rhs_op));
    }
  } else {
    auto x = adjust(m, in.lhs_rows, in.lhs_global, op_kind::none, none);
    auto y = adjust(m, in.rhs_rows, in.rhs_global, op_kind::none, none);
    auto fy = adjust(m, in.rhs_rows, in.rhs_global, in.rhs_kind, in.rhs_op); // h_r(y)
    auto gx = adjust(m, in.lhs_rows, in.lhs_global, in.lhs_kind, in.lhs_op); // g_r(x)
    if (lhs_neg.enabled) {
      auto q = query(fy, in.rhs_rows, in.rhs_global, in.rhs_kind, in.rhs_op, in.lhs_query_entity_mask,
                     in.lhs_query_op_mask);
      auto pos = score_pairs(m.comparator, m.bias, x, q);
      auto nr = prepared_negs(m, in.lhs_neg_rows, in.lhs_global, op_kind::none, none);
      out.lhs = scored_side(x, q, pos, lhs_neg, nr, lhs_offsets, in.lhs_query_mask, in.lhs_candidate_mask);
    }
    if (rhs_neg.enabled) {
      auto q = query(gx, in.lhs_rows, in.lhs_global, in.lhs_kind, in.lhs_op, in.rhs_query_entity_mask,
                     in.rhs_query_op_mask);
      auto pos = score_pairs(m.comparator, m.bias, y, q);
      auto nr = prepared_negs(m, in.rhs_neg_rows, in.rhs_global, op_kind::none, none);
      out.rhs = scored_side(y, q, pos, rhs_neg, nr, rhs_offsets, in.rhs_query_mask, in.rhs_candidate_mask);
    }
    if (do_reg) {
      // each direction as PBG's forward_direction_agnostic: moduli of both
      // vectors when that direction's operator is complex
      const bool rhs_complex = in.rhs_kind == op_kind::complex_diagonal;
      const bool lhs_complex = in.lhs_kind == op_kind::complex_diagonal;
      add_reg(factor_cube(x, rhs_complex));
      add_reg(factor_cube(fy, rhs_complex));
      add_reg(operator_reg(in.rhs_kind, in.rhs_op));
      add_reg(factor_cube(y, lhs_complex));
      add_reg(factor_cube(gx, lhs_complex));
      add_reg(operator_reg(in.lhs_kind, in.lhs_op));
    }
  }
  if (out.lhs && lhs_neg.all) out.lhs->known = in.lhs_known;
  if (out.rhs && rhs_neg.all) out.rhs->known = in.rhs_known;
  out.reg = reg.defined() ? reg * m.regularization_coef : torch::zeros({}, in.lhs_rows.options());
  return out;
}

torch::Tensor batch_loss(const model_desc& m, const forward_result& f, const torch::Tensor& weight,
                         double relation_weight) {
  torch::Tensor total = torch::zeros({}, f.reg.options());
  if (f.lhs) total = total + loss(m.loss, m.margin, f.lhs->pos, f.lhs->neg, weight, f.lhs->known);
  if (f.rhs) total = total + loss(m.loss, m.margin, f.rhs->pos, f.rhs->neg, weight, f.rhs->known);
  return total * relation_weight + f.reg;
}

std::map<std::string, torch::Tensor> gather_operator(const model_desc& m, const shared_params& p, side s,
                                                     const torch::Tensor& rel) {
  std::map<std::string, torch::Tensor> out;
  if (!m.has_operator(s) || rel.numel() == 0) return out;
  const auto r0 = rel[0].item<std::int64_t>();
  const auto& rd = m.relations.at(static_cast<std::size_t>(r0));
  const auto d = m.dims[static_cast<std::size_t>(s == side::lhs ? rd.lhs_type : rd.rhs_type)];
  for (const auto& [param, shape] : operator_params(rd.op, d)) {
    (void)shape;
    const auto& stack = p.stacks.at(shared_params::stack_key(m, r0, s, param));
    out[param] = m.dynamic ? stack.index_select(0, rel) : stack.narrow(0, 0, 1);
  }
  return out;
}

side_scores score_candidates(const model_desc& m, const shared_params& p, side s, const torch::Tensor& lhs_rows,
                             const torch::Tensor& rhs_rows, const torch::Tensor& rel, const torch::Tensor& candidates) {
  torch::NoGradGuard no_grad;
  const auto r0 = rel.numel() > 0 ? rel[0].item<std::int64_t>() : 0;
  const auto& rd = m.relations.at(static_cast<std::size_t>(r0));
  auto global = [&](std::int64_t t) -> torch::Tensor {
    if (!m.global_emb) return {};
    return p.values.at(storage::global_embedding_name(m.entity_types[static_cast<std::size_t>(t)]));
  };
  forward_inputs in;
  in.lhs_rows = lhs_rows;
  in.rhs_rows = rhs_rows;
  in.lhs_global = global(rd.lhs_type);
  in.rhs_global = global(rd.rhs_type);
  in.rhs_kind = rd.op;
  in.rhs_op = gather_operator(m, p, side::rhs, rel);
  if (m.dynamic) {
    in.lhs_kind = rd.op;
    in.lhs_op = gather_operator(m, p, side::lhs, rel);
  }
  in.per_edge_params = m.dynamic;
  const std::map<std::string, torch::Tensor> none;
  torch::Tensor anchor, cand, negs;
  if (!m.dynamic) {
    auto xa = adjust(m, lhs_rows, in.lhs_global, op_kind::none, none);
    auto yb = adjust(m, rhs_rows, in.rhs_global, in.rhs_kind, in.rhs_op);
    if (s == side::lhs) {
      anchor = yb, cand = xa, negs = adjust(m, candidates, in.lhs_global, op_kind::none, none);
    } else {
      anchor = xa, cand = yb, negs = adjust(m, candidates, in.rhs_global, in.rhs_kind, in.rhs_op);
    }
  } else if (s == side::lhs) {
    anchor = adjust(m, rhs_rows, in.rhs_global, in.rhs_kind, in.rhs_op);
    cand = adjust(m, lhs_rows, in.lhs_global, op_kind::none, none);
    negs = adjust(m, candidates, in.lhs_global, op_kind::none, none);
  } else {
    anchor = adjust(m, lhs_rows, in.lhs_global, in.lhs_kind, in.lhs_op);
    cand = adjust(m, rhs_rows, in.rhs_global, op_kind::none, none);
    negs = adjust(m, candidates, in.rhs_global, op_kind::none, none);
  }
  side_scores out;
  out.pos = score_pairs(m.comparator, m.bias, cand, anchor);
  out.neg = score_all(m.comparator, m.bias, anchor.unsqueeze(0), negs).squeeze(0);
  return out;
}

// --- optimisers -------------------------------------------------------------------------------

void rowwise_adagrad(torch::Tensor& emb, torch::Tensor& state, const torch::Tensor& idx, const torch::Tensor& g,
                     double lr) {
  torch::NoGradGuard no_grad;
  state.index_add_(0, idx, g.pow(2).mean(1));
  auto std_ = state.index_select(0, idx).sqrt_().add_(1e-10);
  emb.index_add_(0, idx, g / std_.unsqueeze(1) * -lr);
}

void elementwise_adagrad(torch::Tensor& param, torch::Tensor& state, const torch::Tensor& idx,
                         const torch::Tensor& g, double lr) {
  torch::NoGradGuard no_grad;
  if (idx.defined()) {
    state.index_add_(0, idx, g.pow(2));
    auto std_ = state.index_select(0, idx).sqrt_().add_(1e-10);
    param.index_add_(0, idx, g / std_ * -lr);
  } else {
    state.add_(g.pow(2));
    param.addcdiv_(g, state.sqrt().add_(1e-10), -lr);
  }
}

void entity_adagrad(table& t, const torch::Tensor& idx, const torch::Tensor& g, double lr) {
  if (t.state_width() == 1)
    rowwise_adagrad(t.embeddings, t.state, idx, g, lr);
  else
    elementwise_adagrad(t.embeddings, t.state, idx, g, lr);
}

torch::Tensor state_as(const torch::Tensor& state, std::int64_t rows, std::int64_t width) {
  const auto flat = state.reshape({-1});
  if (flat.numel() == rows * width) return width == 1 ? flat.reshape({rows}) : flat.reshape({rows, width});
  if (width == 1) return flat.reshape({rows, -1}).mean(1); // element-wise state to row-wise
  return flat.reshape({rows, 1}).expand({rows, width}).contiguous(); // row-wise state to element-wise
}

} // namespace abg::model
