// Ranking metrics of `abg eval`: rank = 1 + number of negatives scoring >= the
// positive (ties count against the positive). Sums are kept, not averages, so
// per-thread accumulators merge exactly; the averages are taken at the end.
// Definitions in docs/eval.md.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace abg::eval {

/// Summed ranking statistics of some edges, each ranked on one or both sides.
struct metrics {
  std::uint64_t count = 0;  // edges evaluated
  std::uint64_t ranked = 0; // ranks added ((edge, side) pairs)
  double rank_sum = 0;      // sum of ranks
  double reciprocal_sum = 0; // sum of 1 / rank
  std::uint64_t hits1 = 0, hits3 = 0, hits10 = 0, hits50 = 0;
  double auc_sum = 0;    // sum of auc * weight
  double auc_weight = 0; // sum of weights
  // The loss of the ranked edges against their negatives (held-out edges
  // during training; `abg eval` leaves it out): sum, and the edges it covers.
  double loss_sum = 0;
  std::uint64_t loss_count = 0;

  /// One rank (>= 1) of one side of one edge.
  void add_rank(std::int64_t rank);
  /// An AUC measured on `weight` (edge, side) pairs (PBG: a batch's AUC weighs
  /// its number of edges). NaN (no negatives) is ignored.
  void add_auc(double auc, double weight);
  void add_edges(std::uint64_t edges) { count += edges; }
  /// The summed loss (both sides) of `edges` edges.
  void add_loss(double sum, std::uint64_t edges);
  void merge(const metrics& other);

  // Averages; NaN when nothing was added.
  double mrr() const;
  double mean_rank() const;
  double hits_at_1() const;
  double hits_at_3() const;
  double hits_at_10() const;
  double hits_at_50() const;
  double auc() const;
  double loss() const; // per edge

  /// {"loss" when a loss was added, "mrr", "mean_rank", "hits@1", "hits@3", "hits@10", "hits@50", "auc",
  /// "count"};
  /// undefined averages (nothing ranked) are null.
  nlohmann::json to_json() const;
  /// One line for logs, PBG-style: "[loss: ... , ]mrr: 0.31 , mean_rank: ... , count: N".
  std::string to_string() const;
};

/// Metrics overall and per relation id.
struct eval_stats {
  metrics overall;
  std::map<std::int64_t, metrics> per_relation;

  void add_rank(std::int64_t relation, std::int64_t rank);
  void add_auc(std::int64_t relation, double auc, double weight);
  void add_edges(std::int64_t relation, std::uint64_t edges);
  void add_loss(std::int64_t relation, double sum, std::uint64_t edges);
  void merge(const eval_stats& other);

  /// overall.to_json(), plus with `with_per_relation` a "per_relation" object
  /// keyed by relation name (relation_names[id], or the id when out of range).
  nlohmann::json to_json(bool with_per_relation, const std::vector<std::string>& relation_names = {}) const;
};

} // namespace abg::eval
