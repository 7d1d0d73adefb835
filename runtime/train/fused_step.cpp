// The fused CPU batch step (see fused_step.h, docs/model.md "Two kernel paths").
//
// Per batch: the distinct rows of both sides are copied once into a local
// buffer W (renormalised first under max_norm), gradients are summed into dW,
// and Adagrad writes the tables once at the end, as the reference path's
// sparse gradient does. Per chunk of S edges and per loss side, the anchors A
// [S, d] meet the candidates C = [the chunk's positives; U uniform rows] in
// three sgemm calls: scores A·Cᵀ, then G·C and Gᵀ·A for the score gradient G.
// The rest (operators, cos normalisation, losses, N3) are short loops over d.
#include "runtime/train/fused_step.h"

#include "runtime/train/fused_math.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <vector>

#include <fmt/format.h>

namespace abg::train {

namespace {

using namespace fused;
using model::comparator_kind;
using model::loss_kind;
using model::op_kind;
using model::side;

// Distinct int64 keys -> dense slots 0, 1, ... in order of first appearance
// (open addressing; cleared per batch).
class row_index {
public:
  void reset(std::size_t expected) {
    std::size_t cap = 16;
    while (cap < 2 * expected) cap *= 2;
    keys_.assign(cap, -1);
    slots_.resize(cap);
    mask_ = cap - 1;
    rows.clear();
  }
  std::int32_t slot(std::int64_t key) {
    auto h = static_cast<std::size_t>((static_cast<std::uint64_t>(key) * 0x9E3779B97F4A7C15ull) >> 17) & mask_;
    while (keys_[h] != -1) {
      if (keys_[h] == key) return slots_[h];
      h = (h + 1) & mask_;
    }
    keys_[h] = key;
    slots_[h] = static_cast<std::int32_t>(rows.size());
    rows.push_back(key);
    return slots_[h];
  }
  std::vector<std::int64_t> rows; // slot -> key

private:
  std::vector<std::int64_t> keys_;
  std::vector<std::int32_t> slots_;
  std::size_t mask_ = 0;
};

// Loss of one row: positive score pos, negative scores neg[0..n), masked
// entries already set to model::masked_score (as the reference path does).
// Overwrites neg with d loss / d neg, returns the loss and sets *gpos =
// d loss / d pos. w: edge weight × relation weight. Branch-free loops, so
// that they vectorise.
[[gnu::always_inline]] inline double row_loss(loss_kind k, float margin, float w, float pos, float* neg, int n,
                                              float* gpos) {
  switch (k) {
  case loss_kind::ranking: {
    float loss = 0, active = 0;
#pragma omp simd reduction(+ : loss, active)
    for (int j = 0; j < n; ++j) {
      const float t = margin - pos + neg[j];
      const float on = t >= 0.0f ? 1.0f : 0.0f;
      loss += on * t;
      active += on;
      neg[j] = on * w;
    }
    *gpos = -w * active;
    return static_cast<double>(loss) * w;
  }
  case loss_kind::logistic: {
    auto softplus = [](float x) { return x > 20.0f ? x : std::log1p(std::exp(x)); };
    const float wn = w / static_cast<float>(n);
    float nl = 0;
    for (int j = 0; j < n; ++j) {
      const float x = neg[j];
      nl += softplus(x);
      neg[j] = wn / (1.0f + std::exp(-x));
    }
    *gpos = -w / (1.0f + std::exp(pos));
    return static_cast<double>(w) * softplus(-pos) + static_cast<double>(wn) * nl;
  }
  case loss_kind::softmax: {
    float mx = pos;
#pragma omp simd reduction(max : mx)
    for (int j = 0; j < n; ++j) mx = std::max(mx, neg[j]);
    float sum = 0;
#pragma omp simd reduction(+ : sum)
    for (int j = 0; j < n; ++j) {
      const float x = fast_exp(neg[j] - mx);
      neg[j] = x;
      sum += x;
    }
    const float ep = fast_exp(pos - mx);
    sum += ep;
    const float inv = w / sum;
#pragma omp simd
    for (int j = 0; j < n; ++j) neg[j] *= inv;
    *gpos = ep * inv - w;
    return static_cast<double>(w) * (std::log(sum) + mx - pos);
  }
  }
  return 0;
}

// The sparse backward pays off below one nonzero in this many entries of G
// (an axpy pair per entry against blocked, cache-friendly sgemm).
constexpr std::size_t sparse_ratio = 8;

// One anchor row of a loss side: the positive score <a, pv>, the loss over
// the row's negative scores (replaced by their gradients), and the positive's
// gradient added to da and dpv.
ABG_MULTIVERSION double anchor_row(loss_kind k, float margin, float w, const float* a, const float* pv, float* scores,
                                   int diag, int pad0, int pad1, int n, int d, float* da, float* dpv) {
  const float pos = dot(a, pv, d);
  const auto masked = static_cast<float>(model::masked_score);
  if (diag >= 0) scores[diag] = masked;
  for (int j = pad0; j < pad1; ++j) scores[j] = masked;
  float gpos = 0;
  const double loss = row_loss(k, margin, w, pos, scores, n, &gpos);
  axpy(gpos, pv, da, d);
  axpy(gpos, a, dpv, d);
  return loss;
}

// Copies a table row into the batch buffer; under max_norm rows longer than
// it are first scaled to it (torch's renorm), in the table too (HOGWILD write).
ABG_MULTIVERSION void gather_row(float* row, float* dst, int d, float max_norm) {
  if (max_norm > 0) {
    const float nrm = std::sqrt(dot(row, row, d));
    if (nrm > max_norm) {
      const float f = max_norm / (nrm + 1e-7f);
#pragma omp simd
      for (int i = 0; i < d; ++i) row[i] *= f;
    }
  }
  std::memcpy(dst, row, sizeof(float) * static_cast<std::size_t>(d));
}

// Nonzero entries of a score gradient G [n].
ABG_MULTIVERSION std::size_t count_nonzero(const float* g, std::size_t n) {
  std::size_t nnz = 0;
#pragma omp simd reduction(+ : nnz)
  for (std::size_t k = 0; k < n; ++k) nnz += g[k] != 0.0f ? 1 : 0;
  return nnz;
}

// dA += G·C and dC = Gᵀ·A for a sparse G [rows, cols] (A [rows, d], C [cols, d]):
// one pair of axpys per nonzero entry instead of two dense products.
ABG_MULTIVERSION void sparse_backward(const float* g, int rows, int cols, int d, const float* a, const float* c,
                                      float* da, float* dc) {
  std::memset(dc, 0, sizeof(float) * static_cast<std::size_t>(cols) * static_cast<std::size_t>(d));
  for (int i = 0; i < rows; ++i) {
    const float* gi = g + static_cast<std::size_t>(i) * cols;
    const float* ai = a + static_cast<std::size_t>(i) * d;
    float* dai = da + static_cast<std::size_t>(i) * d;
    for (int j = 0; j < cols; ++j) {
      const float x = gi[j];
      if (x == 0.0f) continue;
      axpy(x, c + static_cast<std::size_t>(j) * d, dai, d);
      axpy(x, ai, dc + static_cast<std::size_t>(j) * d, d);
    }
  }
}

// One table side of a batch: the distinct rows it reads (W) and their
// summed gradients (dW). Both sides share one when they use the same table.
struct table_side {
  model::table* t = nullptr;
  row_index index;
  std::vector<float> w, dw; // slot -> copy of the row, summed gradient
};

} // namespace

struct fused_step::buffers {
  table_side lhs, rhs;
  std::vector<std::int32_t> lslot, rslot, lneg, rneg;
  batch_params params; // global embeddings and operators with their gradients
  // per chunk: up to 4 adjusted positive sets [S, d], their norms and gradients
  std::vector<float> v[4], dv[4], norm[4];
  std::vector<float> cand, dcand, cnorm, scores;
};

fused_step::fused_step() : b_(std::make_unique<buffers>()) {}
fused_step::~fused_step() = default;
fused_step::fused_step(fused_step&&) noexcept = default;
fused_step& fused_step::operator=(fused_step&&) noexcept = default;

std::string fused_unsupported_reason(const model::model_desc& m, const bucket_tables& tables) {
  if (auto why = common_unsupported_reason(m, tables); !why.empty()) return why;
  for (const auto& r : m.relations)
    if (r.all_negs) return fmt::format("relation '{}' has all_negs", r.name);
  return {};
}

double fused_step::operator()(const model::model_desc& m, bucket_tables& tables, model::shared_params& p,
                              const batch_ref& b, std::mt19937_64& rng, double lr, double relation_lr) {
  auto& B = *b_;
  const std::int64_t n = b.size;
  const auto r0 = b.rel[0];
  const auto& rd = m.relations[static_cast<std::size_t>(r0)];
  auto& tl = tables.lhs[static_cast<std::size_t>(rd.lhs_type)];
  auto& tr = tables.rhs[static_cast<std::size_t>(rd.rhs_type)];
  const bool same = tl.embeddings.data_ptr() == tr.embeddings.data_ptr();
  const int d = static_cast<int>(tl.embeddings.size(1));
  const bool cos = m.comparator == comparator_kind::cos;

  // negatives, drawn exactly as the reference path draws them
  const auto ln = model::draw_negatives(m, side::lhs, n, tl.count(), false, rng);
  const auto rn = model::draw_negatives(m, side::rhs, n, tr.count(), false, rng);
  const auto& any = ln.enabled ? ln : rn;
  const std::int64_t S = any.chunk;
  const bool batch_negs = any.batch_negs;
  const std::int64_t chunks = (n + S - 1) / S;
  const std::int64_t ul = ln.enabled ? ln.uniform.size(1) : 0, ur = rn.enabled ? rn.uniform.size(1) : 0;

  // distinct rows
  table_side& L = B.lhs;
  table_side& R = same ? B.lhs : B.rhs;
  L.t = &tl;
  R.t = &tr;
  L.index.reset(static_cast<std::size_t>(2 * n + chunks * (ul + ur)));
  if (!same) R.index.reset(static_cast<std::size_t>(n + chunks * ur));
  B.lslot.resize(static_cast<std::size_t>(n));
  B.rslot.resize(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) {
    B.lslot[static_cast<std::size_t>(i)] = L.index.slot(b.lhs[i]);
    B.rslot[static_cast<std::size_t>(i)] = R.index.slot(b.rhs[i]);
  }
  auto neg_slots = [&](const model::side_negatives& sn, table_side& ts, std::vector<std::int32_t>& out) {
    out.clear();
    if (!sn.enabled) return;
    const auto* u = sn.uniform.data_ptr<std::int64_t>();
    for (std::int64_t i = 0; i < sn.uniform.numel(); ++i) out.push_back(ts.index.slot(u[i]));
  };
  neg_slots(ln, L, B.lneg);
  neg_slots(rn, R, B.rneg);

  // The batch's distinct rows, copied once into a compact buffer: the batch
  // then reads them from cache, however scattered they are in the table
  // (measured: reading them in place was 40% slower).
  auto gather = [&](table_side& ts) {
    const auto k = ts.index.rows.size();
    ts.w.resize(k * static_cast<std::size_t>(d));
    ts.dw.assign(k * static_cast<std::size_t>(d), 0.0f);
    float* emb = ts.t->embeddings.data_ptr<float>();
    const float max_norm = m.max_norm ? static_cast<float>(*m.max_norm) : 0.0f;
    for (std::size_t s = 0; s < k; ++s) {
      if (s + prefetch_distance < k) prefetch_row(emb + ts.index.rows[s + prefetch_distance] * d, d);
      gather_row(emb + ts.index.rows[s] * d, ts.w.data() + s * static_cast<std::size_t>(d), d, max_norm);
    }
  };
  gather(L);
  if (!same) gather(R);

  // global embeddings and operators (side 0 lhs, dynamic relations only; side 1 rhs)
  auto& bp = B.params;
  bp.begin(m, p, r0, b.rel, n, d);
  float *gl = bp.gl, *gr = bp.gr, *dgl = bp.dgl, *dgr = bp.dgr;
  const op_ref no_op;

  // The adjusted positive sets of a chunk: 0 = x (lhs, no operator); 1 = the
  // rhs under its operator; with dynamic relations also 2 = y (rhs, no
  // operator) and 3 = the lhs under the lhs operator. The lhs loss compares
  // anchors 1 with candidates 0 and lhs negatives (no operator); the rhs loss
  // anchors 0 (dynamic: 3) with candidates 1 (dynamic: 2) and rhs negatives
  // (under the rhs operator; dynamic: none).
  const int num_sets = m.dynamic ? 4 : 2;
  const auto sd = static_cast<std::size_t>(S) * static_cast<std::size_t>(d);
  for (int k = 0; k < num_sets; ++k) {
    B.v[k].resize(sd);
    B.dv[k].resize(sd);
    B.norm[k].resize(static_cast<std::size_t>(S));
  }
  struct set_desc {
    bool lhs_table;
    int op_side; // -1 none
  };
  const set_desc sets[4] = {{true, -1}, {false, 1}, {false, -1}, {true, 0}};
  auto set_row = [&](int k, std::int64_t e) {
    return sets[k].lhs_table ? L.w.data() + static_cast<std::size_t>(B.lslot[static_cast<std::size_t>(e)]) * d
                             : R.w.data() + static_cast<std::size_t>(B.rslot[static_cast<std::size_t>(e)]) * d;
  };
  auto set_grad = [&](int k, std::int64_t e) {
    return sets[k].lhs_table ? L.dw.data() + static_cast<std::size_t>(B.lslot[static_cast<std::size_t>(e)]) * d
                             : R.dw.data() + static_cast<std::size_t>(B.rslot[static_cast<std::size_t>(e)]) * d;
  };

  const auto coef = static_cast<float>(m.regularization_coef);
  const bool pbg_n3 = coef != 0.0f && m.regularizer == model::regularizer_kind::n3;
  const bool kbc_n3 = coef != 0.0f && m.regularizer == model::regularizer_kind::n3_kbc;
  const bool complex = rd.op == op_kind::complex_diagonal;
  const float queries = (ln.enabled ? 1.0f : 0.0f) + (rn.enabled ? 1.0f : 0.0f);
  const auto rel_weight = static_cast<float>(rd.weight);
  const auto margin = static_cast<float>(m.margin);
  double total = 0, reg = 0;

  for (std::int64_t c = 0; c < chunks; ++c) {
    const std::int64_t e0 = c * S;
    const int s1 = static_cast<int>(std::min<std::int64_t>(S, n - e0));
    for (int k = 0; k < num_sets; ++k) {
      const bool lt = sets[k].lhs_table;
      for (int i = 0; i < s1; ++i) {
        const auto e = e0 + i;
        const op_ref o = sets[k].op_side < 0 ? no_op : bp.op_for(sets[k].op_side, b.rel[e]);
        B.norm[k][static_cast<std::size_t>(i)] =
            adjust_fwd(set_row(k, e), lt ? gl : gr, o, d, cos, B.v[k].data() + static_cast<std::size_t>(i) * d);
      }
      std::fill(B.dv[k].begin(), B.dv[k].begin() + static_cast<std::ptrdiff_t>(s1) * d, 0.0f);
    }

    for (int ls = 0; ls < 2; ++ls) {
      const auto& negs = ls == 0 ? ln : rn;
      if (!negs.enabled) continue;
      const int anchor = ls == 0 ? 1 : (m.dynamic ? 3 : 0);
      const int pos_set = ls == 0 ? 0 : (m.dynamic ? 2 : 1);
      table_side& ts = ls == 0 ? L : R;
      const std::int32_t* uslots = (ls == 0 ? B.lneg : B.rneg).data();
      const int u = static_cast<int>(ls == 0 ? ul : ur);
      const op_ref uop = (ls == 1 && !m.dynamic) ? bp.op_for(1, r0) : no_op;
      float* ug = ls == 0 ? gl : gr;
      float* udg = ls == 0 ? dgl : dgr;
      const int first_u = batch_negs ? static_cast<int>(S) : 0;
      const int ncols = first_u + u;
      if (ncols == 0) continue;
      B.cand.resize(static_cast<std::size_t>(ncols) * d);
      B.dcand.resize(static_cast<std::size_t>(ncols) * d);
      B.cnorm.resize(static_cast<std::size_t>(ncols));
      if (batch_negs) {
        std::memcpy(B.cand.data(), B.v[pos_set].data(), sizeof(float) * static_cast<std::size_t>(s1) * d);
        std::fill(B.cand.begin() + static_cast<std::ptrdiff_t>(s1) * d,
                  B.cand.begin() + static_cast<std::ptrdiff_t>(S) * d, 0.0f);
      }
      for (int k = 0; k < u; ++k) {
        const auto slot = uslots[c * u + k];
        B.cnorm[static_cast<std::size_t>(first_u + k)] =
            adjust_fwd(ts.w.data() + static_cast<std::size_t>(slot) * d, ug, uop, d, cos,
                       B.cand.data() + static_cast<std::size_t>(first_u + k) * d);
      }
      const float* A = B.v[anchor].data();
      float* dA = B.dv[anchor].data();
      B.scores.resize(static_cast<std::size_t>(s1) * ncols);
      gemm_nt(s1, ncols, d, A, B.cand.data(), 0.0f, B.scores.data());
      double side_loss = 0;
      for (int i = 0; i < s1; ++i) {
        const auto off = static_cast<std::size_t>(i) * d;
        const float w = (b.weight != nullptr ? b.weight[e0 + i] : 1.0f) * rel_weight;
        // masked: the true pair and the padding of a short last chunk
        side_loss += anchor_row(m.loss, margin, w, A + off, B.v[pos_set].data() + off,
                                B.scores.data() + static_cast<std::size_t>(i) * ncols, batch_negs ? i : -1, s1,
                                first_u, ncols, d, dA + off, B.dv[pos_set].data() + off);
      }
      total += side_loss;
      // dA += G·C, dC = Gᵀ·A. Under the ranking loss G is mostly zero once
      // most negatives are beaten by the margin (typically a few percent
      // nonzero after the first epoch): then only its nonzero entries are
      // used, which does a fraction of the two dense products' work.
      const auto cells = static_cast<std::size_t>(s1) * static_cast<std::size_t>(ncols);
      if (m.loss == loss_kind::ranking && count_nonzero(B.scores.data(), cells) * sparse_ratio < cells) {
        sparse_backward(B.scores.data(), s1, ncols, d, A, B.cand.data(), dA, B.dcand.data());
      } else {
        gemm_nn(s1, d, ncols, B.scores.data(), B.cand.data(), 1.0f, dA);
        gemm_tn(ncols, d, s1, B.scores.data(), A, 0.0f, B.dcand.data());
      }
      if (batch_negs)
        for (int i = 0; i < s1; ++i)
          axpy(1.0f, B.dcand.data() + static_cast<std::size_t>(i) * d,
               B.dv[pos_set].data() + static_cast<std::size_t>(i) * d, d);
      for (int k = 0; k < u; ++k) {
        const auto slot = static_cast<std::size_t>(uslots[c * u + k]);
        const auto col = static_cast<std::size_t>(first_u + k);
        adjust_bwd(ts.w.data() + slot * d, ug, uop, d, cos, B.cand.data() + col * d, B.cnorm[col],
                   B.dcand.data() + col * d, ts.dw.data() + slot * d, udg);
      }
    }

    // N3 (kbc's) on the head and tail of each query
    if (kbc_n3)
      for (int i = 0; i < s1; ++i) {
        const auto e = e0 + i;
        reg += n3_kbc_row(set_row(0, e), gl, d, complex, coef, queries, set_grad(0, e), dgl);
        reg += n3_kbc_row(set_row(1, e), gr, d, complex, coef, queries, set_grad(1, e), dgr);
      }
    // N3 (PBG's) on the adjusted positives, then their gradients back to the rows
    for (int k = 0; k < num_sets; ++k) {
      const bool lt = sets[k].lhs_table;
      for (int i = 0; i < s1; ++i) {
        const auto e = e0 + i;
        float* v = B.v[k].data() + static_cast<std::size_t>(i) * d;
        float* dv = B.dv[k].data() + static_cast<std::size_t>(i) * d;
        if (pbg_n3) reg += n3_row(v, dv, d, coef, complex);
        const op_ref o = sets[k].op_side < 0 ? no_op : bp.op_for(sets[k].op_side, b.rel[e]);
        adjust_bwd(set_row(k, e), lt ? gl : gr, o, d, cos, v, B.norm[k][static_cast<std::size_t>(i)], dv,
                   set_grad(k, e), lt ? dgl : dgr);
      }
    }
  }
  if (coef != 0.0f && bp.any_op()) total += bp.n3_operators(m, b.rel, n, r0, ln.enabled, rn.enabled, coef);
  total += static_cast<double>(coef) * reg;

  // ---- HOGWILD ------------------------------------------------------------------
  // As in the reference path (kernel.cpp): workers update the shared tables
  // and parameters without locks; a lost update on a contended row is accepted.
  const auto flr = static_cast<float>(lr), frlr = static_cast<float>(relation_lr);
  auto optimize = [&](table_side& ts) {
    float* emb = ts.t->embeddings.data_ptr<float>();
    float* state = ts.t->state.data_ptr<float>();
    const auto w = ts.t->state_width();
    const auto k = ts.index.rows.size();
    for (std::size_t s = 0; s < k; ++s) {
      if (s + prefetch_distance < k) {
        const auto ahead = ts.index.rows[s + prefetch_distance];
        prefetch_row(emb + ahead * d, d);
        if (w == 1)
          __builtin_prefetch(state + ahead);
        else
          prefetch_row(state + ahead * w, d);
      }
      const auto row = ts.index.rows[s];
      entity_adagrad_row(emb + row * d, state + row * w, ts.dw.data() + s * static_cast<std::size_t>(d), d, w, flr);
    }
  };
  optimize(L);
  if (!same) optimize(R);
  bp.adagrad(p, frlr);
  // --------------------------------------------------------------------------------
  return total;
}

} // namespace abg::train
