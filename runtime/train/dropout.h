// Dropout for the 1-vs-all training (LibKGE's embedder dropout): each element
// of a vector is kept with probability 1 − p and scaled by 1/(1 − p), or
// zeroed. The mask is a pure function of (batch seed, stream, row, element),
// so the fused kernel can recompute a candidate's mask tile by tile and the
// LibTorch reference path draws exactly the same masks.
#pragma once

#include <cstdint>

namespace abg::train {

/// Streams of one batch: the candidates of the lhs and rhs loss sides, their
/// queries, and the queries' entities and relations apart.
enum class dropout_stream : std::uint64_t {
  lhs_candidates,
  rhs_candidates,
  lhs_queries,
  rhs_queries,
  lhs_query_entities,
  rhs_query_entities,
  lhs_query_relations,
  rhs_query_relations
};

/// The mask key of row `row` (an entity offset for candidates, the edge's
/// index in the batch for queries) of `stream` in the batch with `seed`.
std::uint32_t dropout_key(std::uint64_t seed, dropout_stream stream, std::uint64_t row);

/// out[i] = in[i]·1/(1 − p) where element i of the row with `key` is kept,
/// else 0 (in == out is allowed). p in [0, 1).
void dropout_row(const float* in, float* out, int d, std::uint32_t key, float p);

} // namespace abg::train
