// The fused 1-vs-all batch step (see all_negs_step.h, docs/model.md).
//
// Per batch, the positive sets of the fused step (x, the rhs under its
// operator; with dynamic relations also y and the lhs under the lhs
// operator) are computed for all B edges. Per loss side, the anchors A [B, d]
// meet every candidate entity: thread t takes entities [N·t/W, N·(t+1)/W) in
// tiles C [T, d] and computes S = A·Cᵀ, the score gradient G, dA_t += G·C and
// dC = Gᵀ·A, which it adds to its own rows of a dense gradient [N, d]. The
// softmax needs each row's log-sum-exp over all entities first: a first phase
// gathers every thread's running maximum and sum (the scores are kept when a
// thread's entities fit in one tile, recomputed otherwise). The positive
// pair's term, N3 and the operators' gradients are done once per batch on the
// calling thread; row-wise Adagrad then runs over every row, split again.
// With all_negs_precision = "bfloat16" the three products take bfloat16
// copies of A, of each tile and of G, and accumulate in float32.
// Dropout multiplies each side's anchors, and the candidates as each tile is
// built (the positive by its entity's mask), by masks recomputed from the
// batch's seed (dropout.h); the gradients go back through the same masks.
// With dynamic relations the anchor may instead be built from its entity row
// and its operator's parameters each dropped (LibKGE's factor dropout).
#include "runtime/train/all_negs_step.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include <fmt/format.h>

#include "runtime/train/dropout.h"
#include "runtime/train/fused_math.h"

namespace abg::train {

namespace {

using namespace fused;
using model::comparator_kind;
using model::loss_kind;
using model::side;

struct per_thread {
  std::vector<float> scores;             // [B, T]
  std::vector<float> cand, dcand, cnorm; // [T, d], [T]
  std::vector<float> cdrop;              // [T, d]: the candidates after dropout
  std::vector<bf16> cbf, sbf;            // bfloat16 products: the candidates [T, d] and score gradients [B, T]
  std::vector<float> da;                 // [B, d]: this thread's share of dA
  std::vector<float> mx, sum;            // [B]: softmax running maximum and sum; ranking: active count in sum
  std::vector<float> dg;                 // [d]: global embedding gradient
  std::vector<float> op_grad;            // candidates' operator gradient (rhs side without dynamic relations)
  double loss = 0;
  bool kept = false; // the scores of this thread's only tile are still in `scores`
};

// Candidate entities [first, last) of thread t of w.
std::pair<std::int64_t, std::int64_t> share(std::int64_t n, int t, int w) { return {n * t / w, n * (t + 1) / w}; }

float softplus(float x) { return x > 20.0f ? x : std::log1p(std::exp(x)); }

// The loops over a row of scores, with their AVX2/FMA clones (fast_exp vectorises there).

// max of row[0..n), and row[j] = exp(row[j] - max) when `store`; returns Σ exp(row[j] - max) in *sum.
ABG_MULTIVERSION float row_max_sum_exp(float* row, int n, bool store, float* sum) {
  float mx = -std::numeric_limits<float>::infinity();
#pragma omp simd reduction(max : mx)
  for (int j = 0; j < n; ++j) mx = std::max(mx, row[j]);
  float s = 0;
  if (store) {
#pragma omp simd reduction(+ : s)
    for (int j = 0; j < n; ++j) {
      const float e = fast_exp(row[j] - mx);
      row[j] = e;
      s += e;
    }
  } else {
#pragma omp simd reduction(+ : s)
    for (int j = 0; j < n; ++j) s += fast_exp(row[j] - mx);
  }
  *sum = s;
  return mx;
}

// Softmax gradient of scores: row[j] = w·exp(row[j] - lse).
ABG_MULTIVERSION void row_softmax_grad(float* row, int n, float lse, float w) {
#pragma omp simd
  for (int j = 0; j < n; ++j) row[j] = w * fast_exp(row[j] - lse);
}

// The same from exponentials stored by row_max_sum_exp: row[j] *= scale.
ABG_MULTIVERSION void row_scale(float* row, int n, float scale) {
#pragma omp simd
  for (int j = 0; j < n; ++j) row[j] *= scale;
}

// Ranking: loss Σ max(0, base + row[j]) (base = margin - pos), row[j] = w·[base + row[j] ≥ 0]; counts the active.
ABG_MULTIVERSION float row_ranking(float* row, int n, float base, float w, float* active) {
  float l = 0, a = 0;
#pragma omp simd reduction(+ : l, a)
  for (int j = 0; j < n; ++j) {
    const float x = base + row[j];
    const float on = x >= 0.0f ? 1.0f : 0.0f;
    l += on * x;
    a += on;
    row[j] = on * w;
  }
  *active = a;
  return l;
}

} // namespace

struct all_negs_step::buffers {
  std::vector<per_thread> threads;
  std::vector<float> v[4], dv[4], norm[4]; // positive sets [B, d]
  std::vector<float> pos, lse, w;          // [B]
  std::vector<float> sw, inv_k;            // [B]: the loss side's weight w/k, and 1/k (KvsAll; 1vsAll: w, 1)
  std::vector<std::size_t> aoff;           // [B + 1]: where each query's answers' scores start in ascore
  std::vector<float> ascore;               // KvsAll: the scores of each query's known answers
  std::vector<float> grad_l, grad_r;       // dense gradients of the lhs and rhs tables [N, d]
  std::vector<float> drop_a, drop_p;       // [B, d]: anchors and positives after dropout
  std::vector<bf16> abf;                   // [B, d]: the anchors in bfloat16 (all_negs_precision)
  std::vector<float> drop_da, drop_dp;     // and their gradients
  std::vector<float> q_row, q_op, q_norm;  // factor dropout: each query's entity row and operator after dropout
  std::vector<float> q_de, q_dop;          // and one query's gradients of them
  batch_params params;                     // global embeddings and operators with their gradients
};

all_negs_step::all_negs_step(thread_team& team, std::int64_t tile_floats)
    : team_(team), tile_floats_(tile_floats), b_(std::make_unique<buffers>()) {
  b_->threads.resize(static_cast<std::size_t>(team.size()));
}
all_negs_step::~all_negs_step() = default;

bool bf16_products_available() { return bf16_gemm() != nullptr; }

std::string all_negs_unsupported_reason(const model::model_desc& m, const bucket_tables& tables) {
  if (auto why = common_unsupported_reason(m, tables); !why.empty()) return why;
  if (m.max_norm) return "max_norm is set";
  for (const auto& r : m.relations)
    if (!r.all_negs) return fmt::format("relation '{}' has no all_negs", r.name);
  return {};
}

double all_negs_step::operator()(const model::model_desc& m, bucket_tables& tables, model::shared_params& p,
                                 const batch_ref& b, double lr, double relation_lr, std::uint64_t seed) {
  auto& B = *b_;
  const int W = team_.size();
  const std::int64_t n = b.size;
  const int ni = static_cast<int>(n);
  const auto r0 = b.rel[0];
  const auto& rd = m.relations[static_cast<std::size_t>(r0)];
  auto& tl = tables.lhs[static_cast<std::size_t>(rd.lhs_type)];
  auto& tr = tables.rhs[static_cast<std::size_t>(rd.rhs_type)];
  const bool same = tl.embeddings.data_ptr() == tr.embeddings.data_ptr();
  const int d = static_cast<int>(tl.embeddings.size(1));
  const auto ud = static_cast<std::size_t>(d);
  const bool cos = m.comparator == comparator_kind::cos;
  const auto coef = static_cast<float>(m.regularization_coef);
  const auto margin = static_cast<float>(m.margin);
  const auto qp = static_cast<float>(m.query_dropout), cp = static_cast<float>(m.candidate_dropout);
  const bool qdrop = qp > 0.0f, cdrop = cp > 0.0f;
  const auto ep = static_cast<float>(m.query_entity_dropout), rp = static_cast<float>(m.relation_dropout);
  // the query's factors apart; without dynamic relations the rhs operator
  // moves onto the tail queries, conjugated (model_desc allows it for dot and
  // the diagonal operators only), and the tails are scored plain
  const bool fdrop = ep > 0.0f || rp > 0.0f;
  const bool moved = fdrop && !m.dynamic;
  // bfloat16 inputs to the three products (float32 where the CPU lacks AVX512-BF16)
  const bool half = m.bf16_products && bf16_gemm() != nullptr;

  // Dense gradients, all zero between batches (Adagrad clears them).
  auto dense = [&](std::vector<float>& g, const model::table& t) {
    const auto size = static_cast<std::size_t>(t.count()) * ud;
    if (g.size() != size) g.assign(size, 0.0f);
    return g.data();
  };
  float* grad_l = dense(B.grad_l, tl);
  float* grad_r = same ? grad_l : dense(B.grad_r, tr);

  // global embeddings and operators (side 0 lhs, dynamic relations only; side 1 rhs)
  auto& bp = B.params;
  bp.begin(m, p, r0, b.rel, n, d);
  float *gl = bp.gl, *gr = bp.gr, *dgl = bp.dgl, *dgr = bp.dgr;
  const op_ref no_op;

  // The positive sets, as in the fused step: 0 = x, 1 = the rhs under its
  // operator; with dynamic relations 2 = y, 3 = the lhs under the lhs
  // operator; with the operator moved 2 = y (the tail queries' positives).
  struct set_desc {
    bool lhs_table;
    int op_side; // -1 none
  };
  const set_desc sets[4] = {{true, -1}, {false, 1}, {false, -1}, {true, 0}};
  const int num_sets = m.dynamic ? 4 : moved ? 3 : 2;
  const float* el = tl.embeddings.data_ptr<float>();
  const float* er = tr.embeddings.data_ptr<float>();
  auto set_row = [&](int k, std::int64_t e) { return sets[k].lhs_table ? el + b.lhs[e] * d : er + b.rhs[e] * d; };
  auto set_grad = [&](int k, std::int64_t e) {
    return sets[k].lhs_table ? grad_l + b.lhs[e] * d : grad_r + b.rhs[e] * d;
  };
  for (int k = 0; k < num_sets; ++k) {
    B.v[k].resize(static_cast<std::size_t>(n) * ud);
    B.dv[k].assign(static_cast<std::size_t>(n) * ud, 0.0f);
    B.norm[k].resize(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i) {
      const op_ref o = sets[k].op_side < 0 ? no_op : bp.op_for(sets[k].op_side, b.rel[i]);
      B.norm[k][static_cast<std::size_t>(i)] =
          adjust_fwd(set_row(k, i), sets[k].lhs_table ? gl : gr, o, d, cos, B.v[k].data() + static_cast<std::size_t>(i) * ud);
    }
  }
  B.w.resize(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i)
    B.w[static_cast<std::size_t>(i)] = (b.weight != nullptr ? b.weight[i] : 1.0f) * static_cast<float>(rd.weight);

  const auto masked = static_cast<float>(model::masked_score);
  double total = 0;
  for (int ls = 0; ls < 2; ++ls) {
    if (ls == 0 ? m.disable_lhs_negs : m.disable_rhs_negs) continue;
    const int anchor = ls == 0 ? 1 : (m.dynamic ? 3 : 0);
    const int pos_set = ls == 0 ? 0 : (m.dynamic || moved ? 2 : 1);
    const model::table& ct = ls == 0 ? tl : tr;
    const float* cemb = ct.embeddings.data_ptr<float>();
    float* cgrad = ls == 0 ? grad_l : grad_r;
    const std::int64_t* truth = ls == 0 ? b.lhs : b.rhs;
    const std::int64_t N = ct.count();
    const bool cand_op = ls == 1 && !m.dynamic && !moved && bp.ops[1].kind != model::op_kind::none;
    float* cg = ls == 0 ? gl : gr;
    // Candidates that are plain table rows are used in place (no copy).
    const bool trivial = !cos && cg == nullptr && !cand_op && !cdrop;
    const std::int64_t T = std::max<std::int64_t>(1, tile_floats_ / std::max<std::int64_t>(1, n));
    const float* A = B.v[anchor].data();
    const float* P = B.v[pos_set].data();
    const auto cstream = ls == 0 ? dropout_stream::lhs_candidates : dropout_stream::rhs_candidates;
    const auto qstream = ls == 0 ? dropout_stream::lhs_queries : dropout_stream::rhs_queries;
    // Dropout (LibKGE's): the anchors per query, the candidates per entity
    // (the positive by its entity's mask, as its column would be).
    if (qdrop) {
      B.drop_a.resize(static_cast<std::size_t>(n) * ud);
      for (std::int64_t i = 0; i < n; ++i)
        dropout_row(A + i * d, B.drop_a.data() + i * d, d, dropout_key(seed, qstream, static_cast<std::uint64_t>(i)),
                    qp);
      A = B.drop_a.data();
    }
    // Factor dropout (LibKGE's): the query's entity row and its operator's
    // parameters each dropped, then the operator applied (moved: conjugated).
    const bool conj = moved && ls == 1 && bp.ops[1].kind == model::op_kind::complex_diagonal;
    const int qside = moved && ls == 1 ? 1 : sets[anchor].op_side;
    const auto estream = ls == 0 ? dropout_stream::lhs_query_entities : dropout_stream::rhs_query_entities;
    const auto rstream = ls == 0 ? dropout_stream::lhs_query_relations : dropout_stream::rhs_query_relations;
    const std::int64_t ostride = fdrop ? bp.ops[qside].stride : 0;
    const auto oq = static_cast<std::size_t>(2 * ostride);
    // query i's operator over `params` (2·stride floats: a, then b), its gradients into `grad`
    auto query_op = [&](const op_ref& o, float* params, float* grad) {
      op_ref q = o;
      q.a = params;
      q.b = o.b != nullptr ? params + ostride : nullptr;
      q.ga = grad;
      q.gb = o.b != nullptr ? grad + ostride : nullptr;
      return q;
    };
    // the masks of query i's operator parameters (a and b apart), applied to x in place
    auto op_mask = [&](std::int64_t i, float* x, bool has_b) {
      const auto ui = static_cast<std::uint64_t>(i);
      dropout_row(x, x, static_cast<int>(ostride), dropout_key(seed, rstream, 2 * ui), rp);
      if (has_b)
        dropout_row(x + ostride, x + ostride, static_cast<int>(ostride), dropout_key(seed, rstream, 2 * ui + 1), rp);
    };
    // the imaginary half of a complex operator's parameters (or their gradient), conjugating it
    auto negate = [&](float* x) {
      for (std::int64_t j = 0; j < ostride; ++j) x[j] = -x[j];
    };
    if (fdrop) {
      B.drop_a.resize(static_cast<std::size_t>(n) * ud);
      B.q_row.resize(static_cast<std::size_t>(n) * ud);
      B.q_op.assign(static_cast<std::size_t>(n) * oq, 0.0f);
      B.q_norm.resize(static_cast<std::size_t>(n));
      const float* g = sets[anchor].lhs_table ? gl : gr;
      for (std::int64_t i = 0; i < n; ++i) {
        const auto ui = static_cast<std::size_t>(i);
        float* row = B.q_row.data() + ui * ud;
        dropout_row(set_row(anchor, i), row, d, dropout_key(seed, estream, static_cast<std::uint64_t>(i)), ep);
        const op_ref o = bp.op_for(qside, b.rel[i]);
        float* params = B.q_op.data() + ui * oq;
        if (o.a != nullptr) std::memcpy(params, o.a, sizeof(float) * static_cast<std::size_t>(ostride));
        if (o.b != nullptr) std::memcpy(params + ostride, o.b, sizeof(float) * static_cast<std::size_t>(ostride));
        if (rp > 0.0f) op_mask(i, params, o.b != nullptr);
        if (conj) negate(params + ostride);
        B.q_norm[ui] = adjust_fwd(row, g, query_op(o, params, nullptr), d, cos, B.drop_a.data() + ui * ud);
      }
      A = B.drop_a.data();
    }
    if (cdrop) {
      B.drop_p.resize(static_cast<std::size_t>(n) * ud);
      for (std::int64_t i = 0; i < n; ++i)
        dropout_row(P + i * d, B.drop_p.data() + i * d, d,
                    dropout_key(seed, cstream, static_cast<std::uint64_t>(truth[i])), cp);
      P = B.drop_p.data();
    }
    if (half) {
      B.abf.resize(static_cast<std::size_t>(n) * ud);
      to_bf16(A, B.abf.data(), B.abf.size());
    }
    B.pos.resize(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i)
      B.pos[static_cast<std::size_t>(i)] = dot(A + static_cast<std::size_t>(i) * ud, P + static_cast<std::size_t>(i) * ud, d);
    // KvsAll: each query's k known answers are its targets (their scores are
    // recorded as the tiles are scored) and the query weighs w/k
    const std::span<const std::int64_t>* ans = b.answers[ls];
    B.sw.resize(static_cast<std::size_t>(n));
    B.inv_k.resize(static_cast<std::size_t>(n));
    B.aoff.assign(static_cast<std::size_t>(n) + 1, 0);
    for (std::int64_t i = 0; i < n; ++i) {
      const auto ui = static_cast<std::size_t>(i);
      const std::size_t k = ans != nullptr ? ans[i].size() : 1;
      B.inv_k[ui] = 1.0f / static_cast<float>(k);
      B.sw[ui] = B.w[ui] * B.inv_k[ui];
      B.aoff[ui + 1] = B.aoff[ui] + (ans != nullptr ? k : 0);
    }
    B.ascore.assign(B.aoff.back(), 0.0f);
    // calls f(answer index, column) for query i's known answers in columns [j0, j0 + tn), its own entity left out
    auto answers_in = [&](std::int64_t i, std::int64_t j0, int tn, auto&& f) {
      const auto& a = ans[i];
      for (auto it = std::lower_bound(a.begin(), a.end(), j0); it != a.end() && *it < j0 + tn; ++it)
        if (*it != truth[i]) f(static_cast<std::size_t>(it - a.begin()), static_cast<int>(*it - j0));
    };
    const std::size_t op_len = cand_op ? 2 * static_cast<std::size_t>(bp.ops[1].stride) : 0;

    // Builds the candidate tile [j0, j0 + tn) of thread t and its scores, masking the true pairs.
    auto tile_scores = [&](per_thread& pt, std::int64_t j0, int tn) -> const float* {
      const float* C = cemb + j0 * d;
      if (!trivial) {
        pt.cand.resize(static_cast<std::size_t>(tn) * ud);
        pt.cnorm.resize(static_cast<std::size_t>(tn));
        const op_ref o = cand_op ? bp.op_for(1, r0, pt.op_grad.data()) : no_op;
        for (int j = 0; j < tn; ++j)
          pt.cnorm[static_cast<std::size_t>(j)] =
              adjust_fwd(cemb + (j0 + j) * d, cg, o, d, cos, pt.cand.data() + static_cast<std::size_t>(j) * ud);
        C = pt.cand.data();
        if (cdrop) {
          pt.cdrop.resize(static_cast<std::size_t>(tn) * ud);
          for (int j = 0; j < tn; ++j)
            dropout_row(C + j * d, pt.cdrop.data() + j * d, d,
                        dropout_key(seed, cstream, static_cast<std::uint64_t>(j0 + j)), cp);
          C = pt.cdrop.data();
        }
      }
      pt.scores.resize(static_cast<std::size_t>(n) * static_cast<std::size_t>(tn));
      if (half) {
        pt.cbf.resize(static_cast<std::size_t>(tn) * ud);
        to_bf16(C, pt.cbf.data(), pt.cbf.size());
        gemm_nt(ni, tn, d, B.abf.data(), pt.cbf.data(), 0.0f, pt.scores.data());
      } else {
        gemm_nt(ni, tn, d, A, C, 0.0f, pt.scores.data());
      }
      for (std::int64_t i = 0; i < n; ++i) {
        const auto o = truth[i] - j0;
        if (o >= 0 && o < tn) pt.scores[static_cast<std::size_t>(i * tn + o)] = masked;
      }
      // KvsAll: the answers' scores; the logistic loss takes them out of the negatives
      if (ans != nullptr)
        for (std::int64_t i = 0; i < n; ++i)
          answers_in(i, j0, tn, [&](std::size_t a, int col) {
            float& s = pt.scores[static_cast<std::size_t>(i * tn + col)];
            B.ascore[B.aoff[static_cast<std::size_t>(i)] + a] = s;
            if (m.loss == loss_kind::logistic) s = masked;
          });
      return C;
    };

    // Phase 1 (softmax only): each row's maximum and sum of exponentials over this thread's entities.
    if (m.loss == loss_kind::softmax) {
      team_.run([&](int t) {
        auto& pt = B.threads[static_cast<std::size_t>(t)];
        const auto [first, last] = share(N, t, W);
        pt.mx.assign(static_cast<std::size_t>(n), -std::numeric_limits<float>::infinity());
        pt.sum.assign(static_cast<std::size_t>(n), 0.0f);
        pt.kept = last - first <= T;
        for (std::int64_t j0 = first; j0 < last; j0 += T) {
          const int tn = static_cast<int>(std::min(T, last - j0));
          tile_scores(pt, j0, tn);
          for (std::int64_t i = 0; i < n; ++i) {
            // one tile: its exponentials are kept for phase 2 (relative to this row's maximum)
            float s = 0;
            const float mx = row_max_sum_exp(pt.scores.data() + static_cast<std::size_t>(i * tn), tn, pt.kept, &s);
            auto& gm = pt.mx[static_cast<std::size_t>(i)];
            auto& gs = pt.sum[static_cast<std::size_t>(i)];
            if (mx > gm) {
              gs = (gs > 0.0f ? gs * fast_exp(gm - mx) : 0.0f) + s;
              gm = mx;
            } else {
              gs += s * fast_exp(mx - gm);
            }
          }
        }
      });
      // log-sum-exp over the positive and every other entity (PBG: the true
      // entity's column masked, the positive score in front)
      B.lse.resize(static_cast<std::size_t>(n));
      for (std::int64_t i = 0; i < n; ++i) {
        const auto ui = static_cast<std::size_t>(i);
        float M = B.pos[ui];
        for (const auto& pt : B.threads) M = std::max(M, pt.mx[ui]);
        double s = std::exp(static_cast<double>(B.pos[ui] - M));
        for (const auto& pt : B.threads)
          if (pt.sum[ui] > 0) s += static_cast<double>(pt.sum[ui]) * std::exp(static_cast<double>(pt.mx[ui] - M));
        B.lse[ui] = M + static_cast<float>(std::log(s));
      }
    }

    // Phase 2: score gradients, dA, and the candidates' rows.
    const float inv_n = 1.0f / static_cast<float>(N);
    team_.run([&](int t) {
      auto& pt = B.threads[static_cast<std::size_t>(t)];
      const auto [first, last] = share(N, t, W);
      pt.da.assign(static_cast<std::size_t>(n) * ud, 0.0f);
      pt.loss = 0;
      if (m.loss != loss_kind::softmax) {
        pt.sum.assign(static_cast<std::size_t>(n), 0.0f);
        pt.kept = false;
      }
      if (cg != nullptr) pt.dg.assign(ud, 0.0f);
      const bool reuse = m.loss == loss_kind::softmax && pt.kept;
      pt.op_grad.assign(op_len, 0.0f);
      for (std::int64_t j0 = first; j0 < last; j0 += T) {
        const int tn = static_cast<int>(std::min(T, last - j0));
        const float* C = reuse ? (trivial ? cemb + j0 * d : cdrop ? pt.cdrop.data() : pt.cand.data())
                               : tile_scores(pt, j0, tn);
        double loss = 0;
        for (std::int64_t i = 0; i < n; ++i) {
          const auto ui = static_cast<std::size_t>(i);
          float* row = pt.scores.data() + static_cast<std::size_t>(i * tn);
          const float w = B.sw[ui];
          switch (m.loss) {
          case loss_kind::softmax:
            if (reuse)
              row_scale(row, tn, w * std::exp(pt.mx[ui] - B.lse[ui]));
            else
              row_softmax_grad(row, tn, B.lse[ui], w);
            break;
          case loss_kind::logistic: {
            const float wn = w * inv_n;
            float nl = 0;
            for (int j = 0; j < tn; ++j) {
              const float x = row[j];
              nl += softplus(x);
              row[j] = wn / (1.0f + std::exp(-x));
            }
            loss += static_cast<double>(wn) * nl;
            break;
          }
          case loss_kind::ranking: {
            float active = 0;
            loss += static_cast<double>(row_ranking(row, tn, margin - B.pos[ui], w, &active)) * w;
            pt.sum[ui] += active;
            break;
          }
          }
          // KvsAll: the other answers are targets (softmax: of 1/k each)
          if (ans != nullptr) {
            const float wk = w * B.inv_k[ui];
            answers_in(i, j0, tn, [&](std::size_t a, int col) {
              if (m.loss == loss_kind::softmax) {
                row[col] -= wk;
              } else {
                const float s = B.ascore[B.aoff[ui] + a];
                row[col] = -w / (1.0f + std::exp(s));
                loss += static_cast<double>(w) * softplus(-s);
              }
            });
          }
        }
        pt.loss += loss;
        // dA += G·C, and the candidates' gradient Gᵀ·A (into their rows, or beside them to go back through
        // the candidates' operator, dropout or global embedding)
        if (half) {
          pt.sbf.resize(pt.scores.size());
          to_bf16(pt.scores.data(), pt.sbf.data(), pt.sbf.size());
        }
        auto dcand = [&](float beta, float* out) {
          if (half)
            gemm_tn(tn, d, ni, pt.sbf.data(), B.abf.data(), beta, out);
          else
            gemm_tn(tn, d, ni, pt.scores.data(), A, beta, out);
        };
        if (half)
          gemm_nn(ni, d, tn, pt.sbf.data(), pt.cbf.data(), 1.0f, pt.da.data());
        else
          gemm_nn(ni, d, tn, pt.scores.data(), C, 1.0f, pt.da.data());
        if (trivial) {
          dcand(1.0f, cgrad + j0 * d);
        } else {
          pt.dcand.resize(static_cast<std::size_t>(tn) * ud);
          dcand(0.0f, pt.dcand.data());
          if (cdrop)
            for (int j = 0; j < tn; ++j)
              dropout_row(pt.dcand.data() + j * d, pt.dcand.data() + j * d, d,
                          dropout_key(seed, cstream, static_cast<std::uint64_t>(j0 + j)), cp);
          const op_ref o = cand_op ? bp.op_for(1, r0, pt.op_grad.data()) : no_op;
          for (int j = 0; j < tn; ++j) {
            const auto uj = static_cast<std::size_t>(j);
            adjust_bwd(cemb + (j0 + j) * d, cg, o, d, cos, pt.cand.data() + uj * ud, pt.cnorm[uj],
                       pt.dcand.data() + uj * ud, cgrad + (j0 + j) * d, cg != nullptr ? pt.dg.data() : nullptr);
          }
        }
      }
    });

    // The positive pair's term, and the threads' shares of dA and of the shared gradients.
    float* dA = B.dv[anchor].data();
    float* dP = B.dv[pos_set].data();
    if (qdrop || fdrop) {
      B.drop_da.assign(static_cast<std::size_t>(n) * ud, 0.0f);
      dA = B.drop_da.data();
    }
    if (cdrop) {
      B.drop_dp.assign(static_cast<std::size_t>(n) * ud, 0.0f);
      dP = B.drop_dp.data();
    }
    for (const auto& pt : B.threads) {
      total += pt.loss;
      axpy(1.0f, pt.da.data(), dA, static_cast<int>(static_cast<std::size_t>(n) * ud));
      if (cg != nullptr) axpy(1.0f, pt.dg.data(), ls == 0 ? dgl : dgr, d);
      if (cand_op && !pt.op_grad.empty()) {
        const op_ref o = bp.op_for(1, r0);
        axpy(1.0f, pt.op_grad.data(), o.ga, static_cast<int>(op_len));
      }
    }
    for (std::int64_t i = 0; i < n; ++i) {
      const auto ui = static_cast<std::size_t>(i);
      const float w = B.sw[ui], pos = B.pos[ui], ik = B.inv_k[ui];
      float gpos = 0;
      switch (m.loss) {
      case loss_kind::softmax: {
        // the targets' mean score (1vsAll: the positive's)
        double targets = pos;
        for (auto a = B.aoff[ui]; a < B.aoff[ui + 1]; ++a) targets += B.ascore[a];
        total += static_cast<double>(w) * (B.lse[ui] - targets * ik);
        gpos = w * (std::exp(pos - B.lse[ui]) - ik);
        break;
      }
      case loss_kind::logistic:
        total += static_cast<double>(w) * softplus(-pos);
        gpos = -w / (1.0f + std::exp(pos));
        break;
      case loss_kind::ranking: {
        float active = 0;
        for (const auto& pt : B.threads) active += pt.sum[ui];
        gpos = -w * active;
        break;
      }
      }
      axpy(gpos, P + ui * ud, dA + ui * ud, d);
      axpy(gpos, A + ui * ud, dP + ui * ud, d);
    }
    // back through the dropout masks
    for (std::int64_t i = 0; i < n; ++i) {
      const auto off = static_cast<std::size_t>(i) * ud;
      if (qdrop) {
        dropout_row(dA + off, dA + off, d, dropout_key(seed, qstream, static_cast<std::uint64_t>(i)), qp);
        axpy(1.0f, dA + off, B.dv[anchor].data() + off, d);
      }
      if (cdrop) {
        dropout_row(dP + off, dP + off, d, dropout_key(seed, cstream, static_cast<std::uint64_t>(truth[i])), cp);
        axpy(1.0f, dP + off, B.dv[pos_set].data() + off, d);
      }
      if (fdrop) {
        // through the operator over the dropped factors, then the factors' masks
        const bool lt = sets[anchor].lhs_table;
        const op_ref o = bp.op_for(qside, b.rel[i]);
        B.q_de.assign(ud, 0.0f);
        B.q_dop.assign(oq, 0.0f);
        const op_ref q = query_op(o, B.q_op.data() + static_cast<std::size_t>(i) * oq, B.q_dop.data());
        adjust_bwd(B.q_row.data() + off, lt ? gl : gr, q, d, cos, A + off, B.q_norm[static_cast<std::size_t>(i)],
                   dA + off, B.q_de.data(), lt ? dgl : dgr);
        dropout_row(B.q_de.data(), B.q_de.data(), d, dropout_key(seed, estream, static_cast<std::uint64_t>(i)), ep);
        axpy(1.0f, B.q_de.data(), set_grad(anchor, i), d);
        if (rp > 0.0f) op_mask(i, B.q_dop.data(), o.b != nullptr);
        if (conj) negate(B.q_dop.data() + ostride);
        axpy(1.0f, B.q_dop.data(), o.ga, static_cast<int>(ostride));
        if (o.b != nullptr) axpy(1.0f, B.q_dop.data() + ostride, o.gb, static_cast<int>(ostride));
      }
    }
  }

  // N3: kbc's on the head and tail of each query; PBG's on the positive sets,
  // whose gradients then go back to the rows
  double reg = 0;
  const bool lhs_queries = !m.disable_lhs_negs, rhs_queries = !m.disable_rhs_negs;
  const bool complex = rd.op == model::op_kind::complex_diagonal;
  if (coef != 0.0f && m.regularizer == model::regularizer_kind::n3_kbc) {
    const float queries = (lhs_queries ? 1.0f : 0.0f) + (rhs_queries ? 1.0f : 0.0f);
    for (std::int64_t i = 0; i < n; ++i) {
      reg += n3_kbc_row(set_row(0, i), gl, d, complex, coef, queries, set_grad(0, i), dgl);
      reg += n3_kbc_row(set_row(1, i), gr, d, complex, coef, queries, set_grad(1, i), dgr);
    }
  }
  const bool pbg_n3 = coef != 0.0f && m.regularizer == model::regularizer_kind::n3;
  for (int k = 0; k < num_sets; ++k) {
    const bool lt = sets[k].lhs_table;
    for (std::int64_t i = 0; i < n; ++i) {
      const auto off = static_cast<std::size_t>(i) * ud;
      // PBG's N3 on x and the rhs under its operator (the moved operator's plain y is not one more term)
      if (pbg_n3 && (m.dynamic || k < 2)) reg += n3_row(B.v[k].data() + off, B.dv[k].data() + off, d, coef, complex);
      const op_ref o = sets[k].op_side < 0 ? no_op : bp.op_for(sets[k].op_side, b.rel[i]);
      adjust_bwd(set_row(k, i), lt ? gl : gr, o, d, cos, B.v[k].data() + off, B.norm[k][static_cast<std::size_t>(i)],
                 B.dv[k].data() + off, set_grad(k, i), lt ? dgl : dgr);
    }
  }
  total += static_cast<double>(coef) * reg;
  if (coef != 0.0f && bp.any_op())
    total += bp.n3_operators(m, b.rel, n, r0, lhs_queries, rhs_queries, coef);

  // The entity optimizer on every row (the rows of each thread's entities), clearing the gradients.
  const auto flr = static_cast<float>(lr), frlr = static_cast<float>(relation_lr);
  auto optimize = [&](model::table& t, float* grad) {
    team_.run([&](int th) {
      float* emb = t.embeddings.data_ptr<float>();
      float* state = t.state.data_ptr<float>();
      const auto w = t.state_width();
      const auto [first, last] = share(t.count(), th, W);
      for (std::int64_t r = first; r < last; ++r) {
        float* g = grad + r * d;
        entity_adagrad_row(emb + r * d, state + r * w, g, d, w, flr);
        std::memset(g, 0, sizeof(float) * ud);
      }
    });
  };
  optimize(tl, grad_l);
  if (!same) optimize(tr, grad_r);
  bp.adagrad(p, frlr);
  return total;
}

} // namespace abg::train
