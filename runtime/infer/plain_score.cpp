// Torch-free scoring (see include/abg/model/plain_score.h, docs/model.md).
//
// Candidates are scored in blocks of rows: op(x + global) into a small
// buffer (a register-tiled GEMM against Aᵀ for linear and affine, short
// element-wise loops otherwise), then one pass per row for the comparator
// against the prepared anchor. Sums over d are accumulated in double.
#include "abg/model/plain_score.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <thread>

#include "abg/storage/checkpoint.h"

namespace abg::model {

namespace {

// The loops over d get an AVX2/FMA clone chosen at load time by the CPU (GCC
// function multiversioning) next to the portable one.
#define ABG_MULTIVERSION [[gnu::target_clones("arch=x86-64-v3", "default")]]

constexpr std::int64_t gemm_rows = 4;   // rows of the GEMM micro-tile
constexpr std::int64_t gemm_cols = 16;  // columns of the GEMM micro-tile (two 8-float vectors)
constexpr std::int64_t block_rows = 64; // candidate rows transformed at once (a multiple of gemm_rows)
constexpr std::int64_t rows_per_thread = 1 << 15;

using v8 = float __attribute__((vector_size(32)));

expected<std::vector<float>> fetch(const param_lookup& params, const std::string& name, std::int64_t size,
                                   std::string_view shape) {
  auto v = params(name);
  if (v.empty() && size > 0)
    return fail("shared parameter '{}' is missing from the checkpoint", name);
  if (static_cast<std::int64_t>(v.size()) != size)
    return fail("shared parameter '{}' holds {} values in the checkpoint, the model expects {}", name, v.size(),
                shape);
  return std::vector<float>(v.begin(), v.end());
}

// Type t's global embedding (none without global_emb).
expected<std::vector<float>> global_of(const model_desc& m, std::int64_t t, const param_lookup& params) {
  if (!m.global_emb)
    return std::vector<float>{};
  auto d = m.dims[static_cast<std::size_t>(t)];
  return fetch(params, storage::global_embedding_name(m.entity_types[static_cast<std::size_t>(t)]), d,
               fmt::format("[{}]", d));
}

// x -> op(x + global) of relation `rel`'s side `s` (op none: global only).
expected<plain_transform> transform_of(const model_desc& m, std::int64_t rel, side s, bool with_op,
                                       const param_lookup& params) {
  const auto& rd = m.relations.at(static_cast<std::size_t>(rel));
  const auto type = s == side::lhs ? rd.lhs_type : rd.rhs_type;
  plain_transform t;
  t.dim = m.dims[static_cast<std::size_t>(type)];
  auto g = global_of(m, type, params);
  if (!g)
    return std::unexpected(g.error());
  t.global = std::move(*g);
  if (!with_op)
    return t;
  t.op = rd.op;
  for (const auto& [param, shape] : operator_params(rd.op, t.dim)) {
    std::int64_t size = 1;
    for (auto n : shape)
      size *= n;
    auto v = fetch(params, storage::relation_param_name(rel, to_string(s), param), size,
                   shape.size() == 1 ? fmt::format("[{}]", shape[0]) : fmt::format("[{}, {}]", shape[0], shape[1]));
    if (!v)
      return std::unexpected(v.error());
    if (param == "diagonal" || param == "real")
      t.diagonal = std::move(*v);
    else if (param == "imag")
      t.imag = std::move(*v);
    else if (param == "translation")
      t.translation = std::move(*v);
    else
      t.linear = std::move(*v);
  }
  return t;
}

// y = x + global, then the element-wise operators in place (linear and
// affine are left to gemm_block). x and y are [n, dim]; y's rows are `stride` apart.
ABG_MULTIVERSION
void elementwise_block(const plain_transform& t, const float* x, std::int64_t n, float* y, std::int64_t stride) {
  const auto d = t.dim;
  const float* g = t.global.empty() ? nullptr : t.global.data();
  for (std::int64_t i = 0; i < n; ++i) {
    const float* xi = x + i * d;
    float* yi = y + i * stride;
    if (g != nullptr) {
#pragma omp simd
      for (std::int64_t j = 0; j < d; ++j)
        yi[j] = xi[j] + g[j];
    } else {
      std::memcpy(yi, xi, static_cast<std::size_t>(d) * sizeof(float));
    }
    switch (t.op) {
    case op_kind::diagonal: {
      const float* w = t.diagonal.data();
#pragma omp simd
      for (std::int64_t j = 0; j < d; ++j)
        yi[j] *= w[j];
      break;
    }
    case op_kind::translation: {
      const float* b = t.translation.data();
#pragma omp simd
      for (std::int64_t j = 0; j < d; ++j)
        yi[j] += b[j];
      break;
    }
    case op_kind::complex_diagonal: {
      const auto h = d / 2;
      const float* r = t.diagonal.data();
      const float* m = t.imag.data();
#pragma omp simd
      for (std::int64_t j = 0; j < h; ++j) {
        const float re = yi[j], im = yi[j + h];
        yi[j] = re * r[j] - im * m[j];
        yi[j + h] = re * m[j] + im * r[j];
      }
      break;
    }
    default: break;
    }
  }
}

// y [rows, padded] = x [rows, d] · bt [d, padded] (+ translation), rows a
// multiple of gemm_rows, padded of gemm_cols. Micro-tiles of 4 rows × 16
// columns stay in registers across the d products.
ABG_MULTIVERSION
void gemm_block(const float* x, std::int64_t rows, std::int64_t d, const float* bt, std::int64_t padded,
                const float* translation, float* y) {
  for (std::int64_t r = 0; r < rows; r += gemm_rows) {
    const float* x0 = x + r * d;
    const float* x1 = x0 + d;
    const float* x2 = x1 + d;
    const float* x3 = x2 + d;
    for (std::int64_t c = 0; c < padded; c += gemm_cols) {
      v8 a0 = {}, b0 = {}, a1 = {}, b1 = {}, a2 = {}, b2 = {}, a3 = {}, b3 = {};
      const float* col = bt + c;
      for (std::int64_t k = 0; k < d; ++k, col += padded) {
        v8 lo, hi;
        std::memcpy(&lo, col, sizeof lo);
        std::memcpy(&hi, col + 8, sizeof hi);
        a0 += x0[k] * lo;
        b0 += x0[k] * hi;
        a1 += x1[k] * lo;
        b1 += x1[k] * hi;
        a2 += x2[k] * lo;
        b2 += x2[k] * hi;
        a3 += x3[k] * lo;
        b3 += x3[k] * hi;
      }
      float* out = y + r * padded + c;
      std::memcpy(out, &a0, sizeof a0);
      std::memcpy(out + 8, &b0, sizeof b0);
      std::memcpy(out + padded, &a1, sizeof a1);
      std::memcpy(out + padded + 8, &b1, sizeof b1);
      std::memcpy(out + 2 * padded, &a2, sizeof a2);
      std::memcpy(out + 2 * padded + 8, &b2, sizeof b2);
      std::memcpy(out + 3 * padded, &a3, sizeof a3);
      std::memcpy(out + 3 * padded + 8, &b3, sizeof b3);
    }
  }
  if (translation != nullptr) {
    for (std::int64_t r = 0; r < rows; ++r) {
      float* yr = y + r * padded;
#pragma omp simd
      for (std::int64_t j = 0; j < d; ++j)
        yr[j] += translation[j];
    }
  }
}

// The comparator of the prepared anchor a [d] against candidate rows y [n, d]
// (rows `stride` apart), prepared here (cos: normalised, bias coordinate kept).
ABG_MULTIVERSION
void compare_block(comparator_kind cmp, bool bias, const float* a, double a_sq, const float* y, std::int64_t n,
                   std::int64_t d, std::int64_t stride, float* out) {
  const std::int64_t first = bias ? 1 : 0;
  for (std::int64_t i = 0; i < n; ++i) {
    const float* yi = y + i * stride;
    double dot = 0, sq = 0, s = 0;
    if (cmp == comparator_kind::dot) {
#pragma omp simd reduction(+ : dot)
      for (std::int64_t j = first; j < d; ++j)
        dot += static_cast<double>(a[j]) * yi[j];
      s = dot;
    } else {
#pragma omp simd reduction(+ : dot, sq)
      for (std::int64_t j = first; j < d; ++j) {
        dot += static_cast<double>(a[j]) * yi[j];
        sq += static_cast<double>(yi[j]) * yi[j];
      }
      switch (cmp) {
      case comparator_kind::cos: s = dot / std::max(std::sqrt(sq), 1e-12); break;
      case comparator_kind::squared_l2: s = -(a_sq + sq - 2 * dot); break;
      case comparator_kind::l2: s = -std::sqrt(std::max(a_sq + sq - 2 * dot, 1e-30)); break;
      case comparator_kind::dot: break;
      }
    }
    if (bias)
      s += static_cast<double>(a[0]) + yi[0];
    out[i] = static_cast<float>(s);
  }
}

} // namespace

void plain_transform::apply(std::span<const float> x, std::span<float> y) const {
  std::vector<float> xg(x.begin(), x.end());
  for (std::size_t j = 0; j < global.size(); ++j)
    xg[j] += global[j];
  const auto d = static_cast<std::size_t>(dim);
  switch (op) {
  case op_kind::none: std::copy(xg.begin(), xg.end(), y.begin()); break;
  case op_kind::diagonal:
    for (std::size_t j = 0; j < d; ++j)
      y[j] = xg[j] * diagonal[j];
    break;
  case op_kind::translation:
    for (std::size_t j = 0; j < d; ++j)
      y[j] = xg[j] + translation[j];
    break;
  case op_kind::linear:
  case op_kind::affine:
    for (std::size_t j = 0; j < d; ++j) {
      double s = 0;
      for (std::size_t k = 0; k < d; ++k)
        s += static_cast<double>(linear[j * d + k]) * xg[k];
      y[j] = static_cast<float>(s);
      if (op == op_kind::affine)
        y[j] += translation[j];
    }
    break;
  case op_kind::complex_diagonal: {
    const auto h = d / 2;
    for (std::size_t j = 0; j < h; ++j) {
      const float re = xg[j], im = xg[j + h];
      y[j] = re * diagonal[j] - im * imag[j];
      y[j + h] = re * imag[j] + im * diagonal[j];
    }
    break;
  }
  }
}

expected<plain_scorer> plain_scorer::for_relation(const model_desc& m, std::int64_t rel, side s,
                                                  const param_lookup& params) {
  if (rel < 0 || rel >= static_cast<std::int64_t>(m.relations.size()))
    return fail("no relation id {} (the model has {})", rel, m.relations.size());
  // As score_candidates: without dynamic relations only the rhs has an
  // operator, whichever side is ranked; with them the anchor's side applies
  // its own operator (g_r on the lhs, h_r on the rhs) and the candidates none.
  const side anchor_side = s == side::rhs ? side::lhs : side::rhs;
  const bool anchor_op = m.dynamic || anchor_side == side::rhs;
  const bool candidate_op = !m.dynamic && s == side::rhs;
  auto anchor = transform_of(m, rel, anchor_side, anchor_op, params);
  if (!anchor)
    return std::unexpected(anchor.error());
  auto candidate = transform_of(m, rel, s, candidate_op, params);
  if (!candidate)
    return std::unexpected(candidate.error());
  plain_scorer p;
  p.comparator_ = m.comparator;
  p.bias_ = m.bias;
  p.anchor_ = std::move(*anchor);
  p.candidate_ = std::move(*candidate);
  if (p.candidate_.op == op_kind::linear || p.candidate_.op == op_kind::affine) {
    const auto d = p.candidate_.dim;
    p.padded_ = (d + gemm_cols - 1) / gemm_cols * gemm_cols;
    p.linear_t_.assign(static_cast<std::size_t>(d * p.padded_), 0.0f);
    for (std::int64_t j = 0; j < d; ++j)
      for (std::int64_t k = 0; k < d; ++k)
        p.linear_t_[static_cast<std::size_t>(k * p.padded_ + j)] =
          p.candidate_.linear[static_cast<std::size_t>(j * d + k)];
  }
  return p;
}

plain_scorer plain_scorer::cosine(std::int64_t dim, std::span<const float> global) {
  plain_scorer p;
  p.comparator_ = comparator_kind::cos;
  p.bias_ = false;
  p.anchor_.dim = p.candidate_.dim = dim;
  p.anchor_.global.assign(global.begin(), global.end());
  p.candidate_.global = p.anchor_.global;
  return p;
}

void plain_scorer::set_anchor(std::span<const float> row) {
  const auto d = static_cast<std::size_t>(anchor_.dim);
  prepared_.assign(d, 0.0f);
  anchor_.apply(row, prepared_);
  const std::size_t first = bias_ ? 1 : 0;
  double sq = 0;
  for (std::size_t j = first; j < d; ++j)
    sq += static_cast<double>(prepared_[j]) * prepared_[j];
  if (comparator_ == comparator_kind::cos) { // prepare(): x / max(‖x‖, 1e-12), the bias coordinate kept
    const auto norm = std::max(std::sqrt(sq), 1e-12);
    for (std::size_t j = first; j < d; ++j)
      prepared_[j] = static_cast<float>(prepared_[j] / norm);
    sq = 0;
    for (std::size_t j = first; j < d; ++j)
      sq += static_cast<double>(prepared_[j]) * prepared_[j];
  }
  prepared_sq_ = sq;
}

void plain_scorer::score_range(const float* rows, std::int64_t n, float* out) const {
  const auto d = candidate_.dim;
  const bool gemm = !linear_t_.empty();
  const bool plain_rows = candidate_.op == op_kind::none && candidate_.global.empty();
  const std::int64_t stride = gemm ? padded_ : d;
  std::vector<float> x, y;
  if (gemm)
    x.assign(static_cast<std::size_t>(block_rows * d), 0.0f);
  if (!plain_rows)
    y.assign(static_cast<std::size_t>(block_rows * stride), 0.0f);
  for (std::int64_t start = 0; start < n; start += block_rows) {
    const auto count = std::min(block_rows, n - start);
    const float* block = rows + start * d;
    const float* ready = block;
    if (gemm) {
      // x + global into x (elementwise_block leaves linear and affine alone), then x·Aᵀ (+ translation) into y
      elementwise_block(candidate_, block, count, x.data(), d);
      gemm_block(x.data(), (count + gemm_rows - 1) / gemm_rows * gemm_rows, d, linear_t_.data(), padded_,
                 candidate_.op == op_kind::affine ? candidate_.translation.data() : nullptr, y.data());
      ready = y.data();
    } else if (!plain_rows) {
      elementwise_block(candidate_, block, count, y.data(), stride);
      ready = y.data();
    }
    compare_block(comparator_, bias_, prepared_.data(), prepared_sq_, ready, count, d, stride, out + start);
  }
}

void plain_scorer::score(std::span<const float> rows, std::span<float> out, int threads) const {
  const auto n = static_cast<std::int64_t>(out.size());
  const auto parts = std::clamp<std::int64_t>(n / rows_per_thread, 1, std::max(threads, 1));
  if (parts == 1) {
    score_range(rows.data(), n, out.data());
    return;
  }
  std::vector<std::jthread> workers;
  const auto per = (n + parts - 1) / parts;
  for (std::int64_t p = 1; p < parts; ++p) {
    const auto begin = p * per, count = std::min(per, n - begin);
    if (count > 0)
      workers.emplace_back([&, begin, count] { score_range(rows.data() + begin * dim(), count, out.data() + begin); });
  }
  score_range(rows.data(), std::min(per, n), out.data());
}

} // namespace abg::model
