// See fused_math.h.
#include "runtime/train/fused_math.h"

#include <dlfcn.h>

#include <cstring>
#include <stdexcept>

#include <fmt/format.h>

#include "abg/storage/checkpoint.h"

namespace abg::train::fused {

constexpr int cblas_row_major = 101, cblas_no_trans = 111, cblas_trans = 112;

sgemm_fn sgemm() {
  static const auto fn = reinterpret_cast<sgemm_fn>(dlsym(RTLD_DEFAULT, "cblas_sgemm"));
  return fn;
}

// C [m, n] = alpha·A [m, k]·op(B) + beta·C, row-major.
void gemm_nt(int m, int n, int k, const float* a, const float* b, float beta, float* c) {
  if (m == 0 || n == 0) return;
  sgemm()(cblas_row_major, cblas_no_trans, cblas_trans, m, n, k, 1.0f, a, k, b, k, beta, c, n);
}
void gemm_nn(int m, int n, int k, const float* a, const float* b, float beta, float* c) {
  if (m == 0 || n == 0) return;
  sgemm()(cblas_row_major, cblas_no_trans, cblas_no_trans, m, n, k, 1.0f, a, k, b, n, beta, c, n);
}
void gemm_tn(int m, int n, int k, const float* a, const float* b, float beta, float* c) {
  // C [m, n] = Aᵀ·B with A [k, m], B [k, n]
  if (m == 0 || n == 0) return;
  sgemm()(cblas_row_major, cblas_trans, cblas_no_trans, m, n, k, 1.0f, a, m, b, n, beta, c, n);
}

bf16_gemm_fn bf16_gemm() {
  static const auto fn = __builtin_cpu_supports("avx512bf16")
                             ? reinterpret_cast<bf16_gemm_fn>(dlsym(RTLD_DEFAULT, "dnnl_gemm_bf16bf16f32"))
                             : nullptr;
  return fn;
}

namespace {
// oneDNN reports failure by status (0: success); only a bug gets here (bad sizes).
void check_bf16(int status) {
  if (status != 0) throw std::logic_error(fmt::format("dnnl_gemm_bf16bf16f32 failed with status {}", status));
}
} // namespace

void gemm_nt(int m, int n, int k, const bf16* a, const bf16* b, float beta, float* c) {
  if (m == 0 || n == 0) return;
  check_bf16(bf16_gemm()('N', 'T', m, n, k, 1.0f, a, k, b, k, beta, c, n));
}
void gemm_nn(int m, int n, int k, const bf16* a, const bf16* b, float beta, float* c) {
  if (m == 0 || n == 0) return;
  check_bf16(bf16_gemm()('N', 'N', m, n, k, 1.0f, a, k, b, n, beta, c, n));
}
void gemm_tn(int m, int n, int k, const bf16* a, const bf16* b, float beta, float* c) {
  if (m == 0 || n == 0) return;
  check_bf16(bf16_gemm()('T', 'N', m, n, k, 1.0f, a, m, b, n, beta, c, n));
}

ABG_MULTIVERSION void to_bf16(const float* x, bf16* y, std::size_t n) {
#pragma omp simd
  for (std::size_t i = 0; i < n; ++i) {
    const auto u = std::bit_cast<std::uint32_t>(x[i]);
    y[i] = static_cast<bf16>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
  }
}

// v = prepare(op(e + g)); returns the norm of op(e + g) (cos) or 1.
ABG_MULTIVERSION float adjust_fwd(const float* e, const float* g, const op_ref& op, int d, bool cos,
                                                float* v) {
  if (g != nullptr) {
#pragma omp simd
    for (int i = 0; i < d; ++i) v[i] = e[i] + g[i];
  } else {
    std::memcpy(v, e, sizeof(float) * static_cast<std::size_t>(d));
  }
  switch (op.kind) {
  case op_kind::none: break;
  case op_kind::diagonal:
#pragma omp simd
    for (int i = 0; i < d; ++i) v[i] *= op.a[i];
    break;
  case op_kind::translation:
#pragma omp simd
    for (int i = 0; i < d; ++i) v[i] += op.a[i];
    break;
  case op_kind::complex_diagonal: {
    const int h = d / 2;
    float* re = v;
    float* im = v + h;
#pragma omp simd
    for (int i = 0; i < h; ++i) {
      const float x = re[i], y = im[i];
      re[i] = x * op.a[i] - y * op.b[i];
      im[i] = x * op.b[i] + y * op.a[i];
    }
    break;
  }
  default: break; // not fused (see fused_unsupported_reason)
  }
  if (!cos) return 1.0f;
  const float norm = std::sqrt(dot(v, v, d));
  const float inv = 1.0f / std::max(norm, 1e-12f);
#pragma omp simd
  for (int i = 0; i < d; ++i) v[i] *= inv;
  return norm;
}

// Backward of adjust_fwd: dv (overwritten) -> de (added), dg and the
// operator's parameter gradients (added). v and norm from the forward pass.
ABG_MULTIVERSION void adjust_bwd(const float* e, const float* g, const op_ref& op, int d, bool cos,
                                              const float* v, float norm, float* dv, float* de, float* dg) {
  if (cos) {
    if (norm > 1e-12f) {
      const float vd = dot(v, dv, d);
      const float inv = 1.0f / norm;
#pragma omp simd
      for (int i = 0; i < d; ++i) dv[i] = (dv[i] - v[i] * vd) * inv;
    } else {
#pragma omp simd
      for (int i = 0; i < d; ++i) dv[i] *= 1e12f;
    }
  }
  switch (op.kind) {
  case op_kind::none: break;
  case op_kind::diagonal:
    if (op.ga != nullptr) {
#pragma omp simd
      for (int i = 0; i < d; ++i) op.ga[i] += dv[i] * (e[i] + (g != nullptr ? g[i] : 0.0f));
    }
#pragma omp simd
    for (int i = 0; i < d; ++i) dv[i] *= op.a[i];
    break;
  case op_kind::translation:
    if (op.ga != nullptr) axpy(1.0f, dv, op.ga, d);
    break;
  case op_kind::complex_diagonal: {
    const int h = d / 2;
    float* dre = dv;
    float* dim = dv + h;
    if (op.ga != nullptr) {
      for (int i = 0; i < h; ++i) {
        const float x = e[i] + (g != nullptr ? g[i] : 0.0f);
        const float y = e[h + i] + (g != nullptr ? g[h + i] : 0.0f);
        op.ga[i] += dre[i] * x + dim[i] * y;
        op.gb[i] += -dre[i] * y + dim[i] * x;
      }
    }
#pragma omp simd
    for (int i = 0; i < h; ++i) {
      const float r = dre[i], s = dim[i];
      dre[i] = r * op.a[i] + s * op.b[i];
      dim[i] = -r * op.b[i] + s * op.a[i];
    }
    break;
  }
  default: break;
  }
  axpy(1.0f, dv, de, d);
  if (dg != nullptr) axpy(1.0f, dv, dg, d);
}

// Row-wise Adagrad: G += mean(g²), x -= lr·g/(√G + 1e-10).
ABG_MULTIVERSION void rowwise_adagrad_row(float* x, float& state, const float* g, int d, float lr) {
  state += dot(g, g, d) / static_cast<float>(d);
  axpy(-lr / (std::sqrt(state) + 1e-10f), g, x, d);
}

ABG_MULTIVERSION double n3_row(const float* v, float* dv, int d, float coef, bool complex) {
  float cube = 0;
  if (complex) {
    // d/dre |z|³ = 3·|z|·re
    const int h = d / 2;
#pragma omp simd reduction(+ : cube)
    for (int i = 0; i < h; ++i) {
      const float mod = std::sqrt(v[i] * v[i] + v[h + i] * v[h + i]);
      cube += mod * mod * mod;
      dv[i] += 3.0f * coef * mod * v[i];
      dv[h + i] += 3.0f * coef * mod * v[h + i];
    }
    return cube;
  }
#pragma omp simd reduction(+ : cube)
  for (int j = 0; j < d; ++j) {
    const float a = std::fabs(v[j]);
    cube += a * a * a;
    dv[j] += 3.0f * coef * v[j] * a;
  }
  return cube;
}

void elementwise_adagrad(float* value, float* state, const float* g, std::int64_t len, float lr) {
  for (std::int64_t j = 0; j < len; ++j) {
    state[j] += g[j] * g[j];
    value[j] -= lr * g[j] / (std::sqrt(state[j]) + 1e-10f);
  }
}

ABG_MULTIVERSION double n3_kbc_row(const float* e, const float* g, int d, bool complex, float coef, float times,
                                   float* de, float* dg) {
  const float c3 = 3.0f * coef * times;
  double cube = 0;
  auto add = [&](int i, float grad) {
    de[i] += grad;
    if (dg != nullptr) dg[i] += grad;
  };
  if (complex) {
    const int h = d / 2;
    for (int i = 0; i < h; ++i) {
      const float re = e[i] + (g != nullptr ? g[i] : 0.0f), im = e[h + i] + (g != nullptr ? g[h + i] : 0.0f);
      const float mod = std::sqrt(re * re + im * im);
      cube += static_cast<double>(mod) * mod * mod;
      add(i, c3 * mod * re);
      add(h + i, c3 * mod * im);
    }
  } else {
    for (int i = 0; i < d; ++i) {
      const float v = e[i] + (g != nullptr ? g[i] : 0.0f);
      const float a = std::fabs(v);
      cube += static_cast<double>(a) * a * a;
      add(i, c3 * v * a);
    }
  }
  return cube * times;
}

double n3_operator(const op_ref& o, int len, float coef) {
  double reg = 0;
  if (o.kind == op_kind::complex_diagonal) {
    for (int j = 0; j < len; ++j) {
      const float mod = std::sqrt(o.a[j] * o.a[j] + o.b[j] * o.b[j]);
      reg += static_cast<double>(mod) * mod * mod;
      o.ga[j] += 3.0f * coef * mod * o.a[j];
      o.gb[j] += 3.0f * coef * mod * o.b[j];
    }
  } else {
    for (int j = 0; j < len; ++j) {
      const float a = std::fabs(o.a[j]);
      reg += static_cast<double>(a) * a * a;
      o.ga[j] += 3.0f * coef * o.a[j] * a;
    }
  }
  return reg;
}

op_params operator_of(const model::model_desc& m, model::shared_params& p, std::int64_t r0, model::side s, int d) {
  op_params o;
  const auto& rd = m.relations[static_cast<std::size_t>(r0)];
  if (!m.has_operator(s) || rd.op == op_kind::none) return o;
  o.kind = rd.op;
  const auto params = model::operator_params(rd.op, d);
  auto& v0 = p.stacks.at(model::shared_params::stack_key(m, r0, s, params[0].first));
  auto& s0 = p.stack_adagrad.at(model::shared_params::stack_key(m, r0, s, params[0].first));
  o.value = v0.data_ptr<float>();
  o.state = s0.data_ptr<float>();
  o.stride = v0.size(1);
  if (params.size() > 1) {
    o.value_b = p.stacks.at(model::shared_params::stack_key(m, r0, s, params[1].first)).data_ptr<float>();
    o.state_b = p.stack_adagrad.at(model::shared_params::stack_key(m, r0, s, params[1].first)).data_ptr<float>();
  }
  return o;
}

std::string common_unsupported_reason(const model::model_desc& m, const bucket_tables& tables) {
  if (sgemm() == nullptr) return "no CBLAS sgemm in the loaded BLAS library";
  if (m.comparator != model::comparator_kind::dot && m.comparator != model::comparator_kind::cos)
    return "comparator is not dot or cos";
  if (m.bias) return "bias = true";
  for (const auto& r : m.relations)
    if (r.op == op_kind::linear || r.op == op_kind::affine)
      return fmt::format("relation '{}' has operator {}", r.name, model::to_string(r.op));
  for (const auto* side_tables : {&tables.lhs, &tables.rhs})
    for (const auto& t : *side_tables) {
      if (!t.embeddings.defined()) continue;
      if (t.embeddings.scalar_type() != torch::kFloat || !t.embeddings.is_contiguous() || !t.embeddings.is_cpu() ||
          t.state.scalar_type() != torch::kFloat || !t.state.is_contiguous())
        return "a table is not a contiguous float CPU tensor";
    }
  return {};
}

void batch_params::begin(const model::model_desc& m, model::shared_params& p, std::int64_t r0, const std::int64_t* rel,
                         std::int64_t n, int d) {
  dynamic_ = m.dynamic;
  d_ = d;
  const auto ud = static_cast<std::size_t>(d);
  const auto& rd = m.relations[static_cast<std::size_t>(r0)];
  gl = gr = dgl = dgr = nullptr;
  if (m.global_emb) {
    gl_name_ = storage::global_embedding_name(m.entity_types[static_cast<std::size_t>(rd.lhs_type)]);
    gr_name_ = storage::global_embedding_name(m.entity_types[static_cast<std::size_t>(rd.rhs_type)]);
    gl = p.values.at(gl_name_).data_ptr<float>();
    gr = p.values.at(gr_name_).data_ptr<float>();
    gl_grad_.assign(ud, 0.0f);
    dgl = gl_grad_.data();
    if (gl_name_ == gr_name_) {
      dgr = dgl;
    } else {
      gr_grad_.assign(ud, 0.0f);
      dgr = gr_grad_.data();
    }
  }
  ops[0] = operator_of(m, p, r0, model::side::lhs, d);
  ops[1] = operator_of(m, p, r0, model::side::rhs, d);
  rels_.clear();
  if (!any_op()) return;
  rel_slot_.resize(m.relations.size(), -1);
  auto add = [&](std::int64_t r) {
    auto& s = rel_slot_[static_cast<std::size_t>(r)];
    if (s < 0) {
      s = static_cast<std::int32_t>(rels_.size());
      rels_.push_back(r);
    }
  };
  if (m.dynamic) {
    for (std::int64_t i = 0; i < n; ++i) add(rel[i]);
  } else {
    add(r0);
  }
  for (int s = 0; s < 2; ++s)
    if (ops[s].kind != op_kind::none) op_grad_[s].assign(rels_.size() * 2 * static_cast<std::size_t>(ops[s].stride), 0.0f);
}

double batch_params::n3_operators(const model::model_desc& m, const std::int64_t* rel, std::int64_t n,
                                  std::int64_t r0, bool lhs_queries, bool rhs_queries, float coef) {
  double reg = 0;
  for (int s = 0; s < 2; ++s) {
    if (ops[s].kind == op_kind::none) continue;
    const int len = static_cast<int>(ops[s].stride);
    float uses = 1; // queries per edge that use this operator
    if (m.regularizer == model::regularizer_kind::n3_kbc)
      uses = s == 1 ? (lhs_queries ? 1.0f : 0.0f) + (!m.dynamic && rhs_queries ? 1.0f : 0.0f)
                    : (rhs_queries ? 1.0f : 0.0f);
    if (uses == 0) continue;
    if (m.dynamic) {
      for (std::int64_t i = 0; i < n; ++i) reg += uses * n3_operator(op_for(s, rel[i]), len, coef * uses);
    } else {
      // PBG: the batch's one operator once; kbc: once per query
      const float times = m.regularizer == model::regularizer_kind::n3_kbc ? uses * static_cast<float>(n) : 1.0f;
      reg += times * n3_operator(op_for(s, r0), len, coef * times);
    }
  }
  return reg * coef;
}

void batch_params::adagrad(model::shared_params& p, float lr) {
  if (gl != nullptr) {
    elementwise_adagrad(gl, p.adagrad.at(gl_name_).data_ptr<float>(), dgl, d_, lr);
    if (dgr != dgl) elementwise_adagrad(gr, p.adagrad.at(gr_name_).data_ptr<float>(), dgr, d_, lr);
  }
  for (int s = 0; s < 2; ++s) {
    const auto& op = ops[s];
    if (op.kind == op_kind::none) continue;
    for (std::size_t k = 0; k < rels_.size(); ++k) {
      const auto row = dynamic_ ? rels_[k] : 0;
      const float* g = op_grad_[s].data() + k * 2 * static_cast<std::size_t>(op.stride);
      elementwise_adagrad(op.value + row * op.stride, op.state + row * op.stride, g, op.stride, lr);
      if (op.value_b != nullptr)
        elementwise_adagrad(op.value_b + row * op.stride, op.state_b + row * op.stride, g + op.stride, op.stride, lr);
    }
  }
  for (auto r : rels_) rel_slot_[static_cast<std::size_t>(r)] = -1;
  rels_.clear();
}

} // namespace abg::train::fused
