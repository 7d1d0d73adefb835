// Torch-free scoring of one entity against every row of embedding tables: the
// formulas of model::score_candidates (abg/model/model.h) in plain C++ —
// global embedding, relation operator, comparator, bias — plus the cosine
// similarity of the raw embeddings. abg neighbors uses it, so that it runs in
// the abg executable without loading LibTorch. The loops over d have an
// AVX2/FMA clone chosen at load time next to the portable one.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string_view>
#include <vector>

#include "abg/error.h"
#include "abg/model/desc.h"

namespace abg::model {

/// A shared parameter by its checkpoint name (storage::global_embedding_name,
/// storage::relation_param_name); an empty span when the checkpoint has none.
using param_lookup = std::function<std::span<const float>(std::string_view name)>;

/// One side's x -> op(x + global), the embedding the comparator prepares.
struct plain_transform {
  op_kind op = op_kind::none;
  std::int64_t dim = 0;
  std::vector<float> global;      // [dim], or empty: no global embedding
  std::vector<float> diagonal;    // diagonal [dim]; complex_diagonal's "real" [dim/2]
  std::vector<float> imag;        // complex_diagonal's "imag" [dim/2]
  std::vector<float> translation; // translation, affine [dim]
  std::vector<float> linear;      // linear, affine: A [dim, dim] row-major, y = A·x

  /// op(x + global) of one row.
  void apply(std::span<const float> x, std::span<float> y) const;
};

class plain_scorer {
public:
  /// Relation `rel` scored as score_candidates(m, params, s, ...) scores it:
  /// side rhs, the anchor is the lhs entity and the candidates are rhs
  /// entities (rows of the relation's rhs type); side lhs, the reverse. Fails
  /// naming the parameter when one is missing or has the wrong size.
  static expected<plain_scorer> for_relation(const model_desc& m, std::int64_t rel, side s,
                                             const param_lookup& params);
  /// Cosine similarity of x + global (LibTorch's cosine_similarity, eps
  /// 1e-12); `global` empty: none. Bias coordinates are not special here.
  static plain_scorer cosine(std::int64_t dim, std::span<const float> global);

  std::int64_t dim() const { return anchor_.dim; }
  /// The anchor entity's raw embedding [dim]; call before score().
  void set_anchor(std::span<const float> row);
  /// Scores of raw candidate rows [n, dim] (n = out.size()) into out, using
  /// up to `threads` threads. Thread-safe: the scorer is not modified.
  void score(std::span<const float> rows, std::span<float> out, int threads = 1) const;

private:
  void score_range(const float* rows, std::int64_t n, float* out) const;

  comparator_kind comparator_ = comparator_kind::cos;
  bool bias_ = false;
  plain_transform anchor_, candidate_;
  std::vector<float> prepared_;   // prepare(anchor_op(anchor)) [dim]
  double prepared_sq_ = 0;        // its squared norm without the bias coordinate
  std::vector<float> linear_t_;   // candidate linear operator: Aᵀ [dim, padded dim], zero-padded
  std::int64_t padded_ = 0;       // dim rounded up to the GEMM tile
};

} // namespace abg::model
