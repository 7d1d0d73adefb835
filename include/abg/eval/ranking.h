// What both ranking protocols share: the scoring callback (the model is
// injected, not linked), the global numbering of entities, and the rank of
// positives among score matrices.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "abg/config.h"
#include "abg/error.h"
#include "abg/storage/entity_store.h"

namespace abg::eval {

/// The side of an edge that is replaced by candidates.
enum class side : std::uint8_t { lhs = 0, rhs = 1 };

/// Scores one relation's edges against shared candidates:
/// score(side, rel, anchors [b] int64, candidates [c] int64) -> [b, c] float.
/// With side::rhs entry (i, j) is the score of (anchors[i], rel, candidates[j]);
/// with side::lhs that of (candidates[j], rel, anchors[i]). Ids are those of
/// the protocol: global per-type indices (filtered) or offsets in the bucket's
/// partitions (sampled). Called concurrently from several threads (with
/// torch::NoGradGuard set): it must only read shared state.
using score_fn = std::function<at::Tensor(side, std::int64_t rel, const at::Tensor& anchors,
                                             const at::Tensor& candidates)>;

/// Scores edges one by one: pair_score(side, rel, anchors [b], truths [b]) ->
/// [b], entry i the score of the edge (anchors[i], rel, truths[i]) (side::rhs)
/// or (truths[i], rel, anchors[i]) (side::lhs), computed on its own row as PBG
/// computes positive scores, not read off a candidates matrix. Same ids and
/// threading rules as score_fn.
using pair_score_fn = std::function<at::Tensor(side, std::int64_t rel, const at::Tensor& anchors,
                                                  const at::Tensor& truths)>;

/// Global numbering of one entity type's entities: partition p's entities are
/// [begin(p), begin(p) + count(p)), in partition order (prefix sums of counts).
class entity_index {
public:
  entity_index() = default;
  explicit entity_index(std::vector<std::int64_t> counts);

  std::int64_t num_partitions() const { return static_cast<std::int64_t>(counts_.size()); }
  std::int64_t count(std::int64_t partition) const { return counts_[static_cast<std::size_t>(partition)]; }
  std::int64_t begin(std::int64_t partition) const { return begins_[static_cast<std::size_t>(partition)]; }
  std::int64_t total() const { return begins_.back(); }
  /// The global index of (partition, offset); no bounds check.
  std::int64_t global(std::int64_t partition, std::int64_t offset) const { return begin(partition) + offset; }
  /// The (partition, offset) of a global index in [0, total()).
  std::pair<std::int64_t, std::int64_t> local(std::int64_t global_index) const;

private:
  std::vector<std::int64_t> counts_;
  std::vector<std::int64_t> begins_{0}; // size num_partitions + 1
};

/// The entity types of a dataset and, per relation id, the types of its sides.
class entity_space {
public:
  entity_space() = default;
  /// `relation_types[rel]` = (lhs type, rhs type) as indices into `types`.
  entity_space(std::vector<entity_index> types, std::vector<std::pair<std::size_t, std::size_t>> relation_types);
  /// From a config and its entity path's entities.json. With dynamic relations
  /// every relation id of the entity path has the types of config.relations[0].
  static expected<entity_space> create(const config& cfg, const storage::entity_store_meta& meta);

  std::int64_t num_relations() const { return static_cast<std::int64_t>(relation_types_.size()); }
  const entity_index& type(std::size_t t) const { return types_[t]; }
  std::size_t type_of(std::int64_t rel, side s) const {
    const auto& [l, r] = relation_types_[static_cast<std::size_t>(rel)];
    return s == side::lhs ? l : r;
  }
  const entity_index& of(std::int64_t rel, side s) const { return types_[type_of(rel, s)]; }

private:
  std::vector<entity_index> types_;
  std::vector<std::pair<std::size_t, std::size_t>> relation_types_;
};

/// An edge with global per-type entity indices.
struct triple {
  std::int64_t lhs = 0, rel = 0, rhs = 0;
  friend bool operator==(const triple&, const triple&) = default;
};

/// Ranks of positives among negatives, and PBG's AUC of them.
struct ranked_scores {
  std::vector<std::int64_t> ranks; // 1 + #unmasked negatives of the row scoring >= its positive
  /// Fraction of (positive i, negative (j, l)) pairs over ALL rows i, j with
  /// pos[i] > neg[j, l], masked negatives counting as beaten (PBG sets them to
  /// -1e9); the exact expectation of PBG's compute_randomized_auc. NaN if k = 0.
  double auc = 0;
};

/// pos [n] float, neg [n, k] float, mask [n, k] bool (true = not a negative:
/// the true pair, padding) or an undefined tensor for none.
ranked_scores rank_from_scores(const at::Tensor& pos, const at::Tensor& neg, const at::Tensor& mask = {});

} // namespace abg::eval
