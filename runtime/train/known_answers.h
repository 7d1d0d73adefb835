// KvsAll's targets (all_negs_targets = "known"): for each edge (h, r, t) of a
// bucket, the distinct entities that answer its lhs query (?, r, t) and its
// rhs query (h, r, ?) among the edges trained with it. LibKGE's KvsAll trains
// each distinct query against all its answers at once; the 1-vs-all kernel
// trains edges, so each edge's query carries its answers and weighs 1/k.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace abg::train {

class known_answers {
public:
  /// The answers of every query of `n` edges (partition offsets and relation ids).
  static known_answers build(const std::int64_t* lhs, const std::int64_t* rhs, const std::int64_t* rel,
                             std::int64_t n);

  /// The answers of edge e's query on side s (0: the heads of (?, r, t),
  /// 1: the tails of (h, r, ?)), sorted and distinct; the edge's own entity
  /// is among them.
  std::span<const std::int64_t> of(int s, std::int64_t e) const {
    const auto u = static_cast<std::size_t>(e);
    const auto& side = sides_[s];
    return {side.entities.data() + side.first[u], static_cast<std::size_t>(side.count[u])};
  }

private:
  struct side_index {
    std::vector<std::int64_t> entities; // the answers, query after query
    std::vector<std::int64_t> first;    // per edge: where its query's answers start
    std::vector<std::int32_t> count;    // per edge: how many there are
  };
  side_index sides_[2];
};

} // namespace abg::train
