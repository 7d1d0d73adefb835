// PBG's eval_fraction: the edges of a bucket's chunk held out of training and
// evaluated before and after the bucket is trained (runtime/cluster/train.cpp).
// The choice depends on the run seed, the edge path, the edge chunk and the
// bucket, never on the epoch, so every epoch holds out the same edges.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "abg/error.h"
#include "abg/model/kernel.h"

namespace abg::train {

/// How many of a chunk's `num_edges` edges are held out: PBG's
/// int(num_edges * eval_fraction), rounded down.
std::int64_t num_held_out(std::int64_t num_edges, double eval_fraction);

/// The seed that picks the held-out edges of bucket (lhs, rhs) of chunk
/// `edge_chunk` of edge path `edge_path` in a run seeded `run_seed`.
std::uint64_t held_out_seed(std::uint64_t run_seed, std::int64_t edge_path, std::int64_t edge_chunk,
                            std::int64_t lhs_partition, std::int64_t rhs_partition);

/// num_held_out(num_edges, eval_fraction) distinct indices in [0, num_edges),
/// ascending: a uniformly random subset determined by `seed` alone
/// (selection sampling, Knuth's Algorithm S; one pass, no extra memory).
/// Unlike PBG, which draws with replacement, no edge is held out twice.
std::vector<std::int64_t> held_out_indices(std::int64_t num_edges, double eval_fraction, std::uint64_t seed);

struct held_out_split {
  bucket_edges train;    // the other edges, in their original order (weights kept)
  bucket_edges held_out; // the held-out edges, in index order (weights kept)
};

/// Splits `edges` into the edges at `held_out` (ascending, distinct, in
/// range, as held_out_indices gives them) and the rest.
expected<held_out_split> split_held_out(const bucket_edges& edges, std::span<const std::int64_t> held_out);

} // namespace abg::train
