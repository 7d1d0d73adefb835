// Building blocks shared by the fused CPU kernels (fused_step.cpp: sampled
// negatives; all_negs_step.cpp: every entity of the partition): CBLAS sgemm,
// the element-wise operators with their backward, N3, Adagrad on raw float
// buffers. Plain loops over d; no LibTorch dispatch.
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "abg/model/kernel.h"
#include "abg/model/model.h"

namespace abg::train::fused {

using model::op_kind;

// CBLAS, looked up at run time: LibTorch has already loaded the system BLAS
// (libblas.so.3, OpenBLAS when installed), so the build needs no BLAS headers.
// The loops over d get an AVX2/FMA clone chosen at load time by the CPU
// (GCC function multiversioning) next to the portable one; the small helpers
// dot and axpy are always inlined, so they take the caller's instruction set.
#define ABG_MULTIVERSION [[gnu::target_clones("arch=x86-64-v3", "default")]]

using sgemm_fn = void (*)(int order, int trans_a, int trans_b, int m, int n, int k, float alpha, const float* a,
                          int lda, const float* b, int ldb, float beta, float* c, int ldc);
/// The loaded BLAS library's cblas_sgemm, or null.
sgemm_fn sgemm();

/// C [m, n] = A [m, k]·Bᵀ (B [n, k]) + beta·C, row-major.
void gemm_nt(int m, int n, int k, const float* a, const float* b, float beta, float* c);
/// C [m, n] = A [m, k]·B (B [k, n]) + beta·C.
void gemm_nn(int m, int n, int k, const float* a, const float* b, float beta, float* c);
/// C [m, n] = Aᵀ·B (A [k, m], B [k, n]) + beta·C.
void gemm_tn(int m, int n, int k, const float* a, const float* b, float beta, float* c);

// bfloat16 products (all_negs_precision = "bfloat16"): oneDNN's
// dnnl_gemm_bf16bf16f32, which LibTorch has loaded (libdnnl.so.2), takes
// bfloat16 inputs and accumulates into float32, as sgemm's C. Used only on a
// CPU with AVX512-BF16, where it runs about 2.4x the float32 sgemm per core;
// elsewhere oneDNN emulates it, slower than float32.
using bf16 = std::uint16_t;
using bf16_gemm_fn = int (*)(char trans_a, char trans_b, std::int64_t m, std::int64_t n, std::int64_t k, float alpha,
                             const bf16* a, std::int64_t lda, const bf16* b, std::int64_t ldb, float beta, float* c,
                             std::int64_t ldc);
/// oneDNN's bfloat16 GEMM when it is loaded and this CPU has AVX512-BF16, else null.
bf16_gemm_fn bf16_gemm();
/// The same three products from bfloat16 inputs (bf16_gemm() must be non-null).
void gemm_nt(int m, int n, int k, const bf16* a, const bf16* b, float beta, float* c);
void gemm_nn(int m, int n, int k, const bf16* a, const bf16* b, float beta, float* c);
void gemm_tn(int m, int n, int k, const bf16* a, const bf16* b, float beta, float* c);
/// y[i] = x[i] rounded to the nearest bfloat16 (ties to even).
void to_bf16(const float* x, bf16* y, std::size_t n);

[[gnu::always_inline]] inline float dot(const float* a, const float* b, int d) {
  float s = 0;
#pragma omp simd reduction(+ : s)
  for (int i = 0; i < d; ++i) s += a[i] * b[i];
  return s;
}

[[gnu::always_inline]] inline void axpy(float alpha, const float* x, float* y, int d) {
#pragma omp simd
  for (int i = 0; i < d; ++i) y[i] += alpha * x[i];
}

// An operator with its parameters (a: diagonal / translation / real, b: imag)
// and where their gradients go (null: not trained here).
struct op_ref {
  op_kind kind = op_kind::none;
  const float* a = nullptr;
  const float* b = nullptr;
  float* ga = nullptr;
  float* gb = nullptr;
};

/// v = prepare(op(e + g)) (g: global embedding or null); returns the norm of
/// op(e + g) under cos, else 1.
float adjust_fwd(const float* e, const float* g, const op_ref& op, int d, bool cos, float* v);

/// Backward of adjust_fwd: dv (overwritten) -> de (added), dg and the
/// operator's parameter gradients (added). v and norm from the forward pass.
void adjust_bwd(const float* e, const float* g, const op_ref& op, int d, bool cos, const float* v, float norm,
                float* dv, float* de, float* dg);

// exp(x) for float, written so that `omp simd` loops vectorise it (libm's
// expf is a scalar call): Cephes' range reduction by ln 2 and degree-6
// polynomial, relative error ~1e-7; 0 below -87.3 (the masked scores).
[[gnu::always_inline]] inline float fast_exp(float x) {
  const float big = std::min(x, 88.7f);
  const float n = std::floor(big * 1.44269504088896341f + 0.5f);
  const float r = big - n * 0.693359375f + n * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const auto bits = static_cast<std::int32_t>(static_cast<std::uint32_t>(static_cast<std::int32_t>(n) + 127) << 23);
  const float scaled = p * std::bit_cast<float>(bits);
  return x < -87.3f ? 0.0f : scaled;
}

// Rows are read in random order from tables far larger than the caches:
// fetching a few rows ahead hides most of the memory latency.
constexpr std::size_t prefetch_distance = 8;
inline void prefetch_row(const float* row, int d) {
  for (int i = 0; i < d; i += 16) __builtin_prefetch(row + i);
}

/// Row-wise Adagrad: G += mean(g²), x -= lr·g/(√G + 1e-10).
void rowwise_adagrad_row(float* x, float& state, const float* g, int d, float lr);

/// Element-wise Adagrad on len values: G += g², x -= lr·g/(√G + 1e-10).
void elementwise_adagrad(float* value, float* state, const float* g, std::int64_t len, float lr);

/// The entity optimizer on one row whose state starts at `state`: row-wise
/// Adagrad with one state value per row, element-wise with d (table::state_width).
inline void entity_adagrad_row(float* x, float* state, const float* g, int d, std::int64_t state_width, float lr) {
  if (state_width == 1)
    rowwise_adagrad_row(x, *state, g, d, lr);
  else
    elementwise_adagrad(x, state, g, d, lr);
}

/// PBG's N3 of one adjusted vector: returns Σ|v|³ and adds its gradient ×
/// coef to dv; on the moduli of the (v[i], v[i + d/2]) pairs when `complex`
/// (the relation's operator is complex_diagonal), as PBG's
/// `prepare_embs_for_reg` takes them.
double n3_row(const float* v, float* dv, int d, float coef, bool complex);

/// kbc's N3 of one entity factor v = e + g (g: global embedding or null):
/// returns `times`·Σ|v|³ (v counted in that many queries), on the moduli of
/// the (v[i], v[i + d/2]) pairs when `complex`, and adds its gradient ×
/// coef to de (and dg).
double n3_kbc_row(const float* e, const float* g, int d, bool complex, float coef, float times, float* de, float* dg);

/// N3 of an operator's parameters (len values each): complex_diagonal on the
/// moduli of its (real, imag) pairs, the others element-wise. Adds the
/// gradient to op.ga / op.gb; returns Σ|·|³.
double n3_operator(const op_ref& op, int len, float coef);

// Per-edge operator parameters: relation id -> dense slot of the batch.
struct op_params {
  op_kind kind = op_kind::none;
  float* value = nullptr; // stack base (row r at r * stride for a, + half for b)
  float* state = nullptr;
  std::int64_t stride = 0; // floats per relation row of each parameter tensor
  float* value_b = nullptr;
  float* state_b = nullptr;
};

/// The operator of side `s` of the model's relations (relation `r0`'s kind;
/// with dynamic relations one stack row per relation), or kind none when that
/// side has none.
op_params operator_of(const model::model_desc& m, model::shared_params& p, std::int64_t r0, model::side s, int d);

/// What both fused kernels refuse (empty: nothing): no sgemm, a comparator
/// other than dot and cos, bias, linear or affine operators, a table that is
/// not a contiguous float CPU tensor. Each kernel adds its own conditions.
std::string common_unsupported_reason(const model::model_desc& m, const bucket_tables& tables);

/// A batch's shared parameters as both fused kernels train them: the global
/// embeddings of its two sides and its operators, with dense gradient
/// buffers (operators: one slot per relation id of the batch), and their
/// element-wise Adagrad step.
class batch_params {
public:
  /// Set-up for a batch of n edges with relation ids rel, r0 = rel[0].
  void begin(const model::model_desc& m, model::shared_params& p, std::int64_t r0, const std::int64_t* rel,
             std::int64_t n, int d);

  /// The operator of side s (0 lhs, dynamic relations only; 1 rhs) for
  /// relation r, its gradients into `grad` (null: the batch's slot of r).
  op_ref op_for(int s, std::int64_t r, float* grad = nullptr) {
    op_ref o;
    const auto& op = ops[s];
    o.kind = op.kind;
    if (op.kind == op_kind::none) return o;
    const auto row = dynamic_ ? r : 0;
    o.a = op.value + row * op.stride;
    o.b = op.value_b != nullptr ? op.value_b + row * op.stride : nullptr;
    float* g = grad != nullptr ? grad
                               : op_grad_[s].data() + static_cast<std::size_t>(rel_slot_[static_cast<std::size_t>(r)]) *
                                                          2 * static_cast<std::size_t>(op.stride);
    o.ga = g;
    o.gb = op.value_b != nullptr ? g + op.stride : nullptr;
    return o;
  }
  bool any_op() const { return ops[0].kind != op_kind::none || ops[1].kind != op_kind::none; }

  /// N3 of the batch's operator parameters (n edges, relation ids rel; r0
  /// the batch's relation without dynamic relations), their gradients into
  /// the batch's slots. PBG's: once per edge with dynamic relations, once
  /// per batch without. kbc's: once per query, the lhs queries (lhs
  /// negatives) using the rhs operator, the rhs queries the lhs operator
  /// with dynamic relations and the rhs one without. Returns the weighted
  /// Σ|·|³ times coef (the loss term).
  double n3_operators(const model::model_desc& m, const std::int64_t* rel, std::int64_t n, std::int64_t r0,
                      bool lhs_queries, bool rhs_queries, float coef);

  /// Adagrad on the global embeddings and the batch's operator rows with the
  /// gradients gathered; frees the relation slots for the next batch.
  void adagrad(model::shared_params& p, float lr);

  op_params ops[2];
  // global embeddings of the lhs and rhs types and their gradients (null
  // without global_emb; one gradient buffer when both sides share the type)
  float* gl = nullptr;
  float* gr = nullptr;
  float* dgl = nullptr;
  float* dgr = nullptr;

private:
  bool dynamic_ = false;
  int d_ = 0;
  std::string gl_name_, gr_name_;
  std::vector<float> gl_grad_, gr_grad_;
  std::vector<float> op_grad_[2];       // per side: [relation slots, 2 · stride]
  std::vector<std::int32_t> rel_slot_; // relation id -> slot (-1: not in this batch)
  std::vector<std::int64_t> rels_;     // slot -> relation id
};

} // namespace abg::train::fused
