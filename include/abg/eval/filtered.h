// Filtered full ranking (the FB15k-237 / WN18RR protocol): each test edge is
// ranked on both sides against every entity of the side's type, with the other
// known true triples (of all edge paths) removed from the candidates.
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <vector>

#include "abg/eval/metrics.h"
#include "abg/eval/ranking.h"
#include "abg/storage/bucket_file.h"
#include "abg/storage/files.h"

namespace abg::eval {

/// The known true triples, as two sorted, de-duplicated arrays: by (rel, lhs,
/// rhs) and by (rel, rhs, lhs). 48 bytes per distinct triple.
class known_triples {
public:
  known_triples() = default;
  /// Sorts and de-duplicates.
  explicit known_triples(std::vector<triple> triples);

  std::size_t size() const { return by_lhs_.size(); }
  bool contains(const triple& t) const;
  /// The known triples (rel, lhs, *), sorted by rhs.
  std::span<const triple> with_lhs(std::int64_t rel, std::int64_t lhs) const;
  /// The known triples (*, rel, rhs), sorted by lhs.
  std::span<const triple> with_rhs(std::int64_t rel, std::int64_t rhs) const;

private:
  std::vector<triple> by_lhs_, by_rhs_;
};

/// Appends the edges of one bucket (lhs_partition, rhs_partition) as global
/// triples. Types with one partition use partition 0 whatever the bucket.
/// Fails on an out-of-range relation id or offset.
expected<void> append_bucket_edges(const storage::bucket_reader& bucket, std::int64_t lhs_partition,
                                   std::int64_t rhs_partition, const entity_space& space, std::vector<triple>& out);

/// Every edge of an edge path (all buckets of its manifest.json), as global triples.
expected<std::vector<triple>> read_edge_path(const std::filesystem::path& edge_path, const entity_space& space,
                                             const storage::dataset_id* expected_id = nullptr);

/// The known true triples of several edge paths (e.g. train, valid, test),
/// read bucket by bucket.
expected<known_triples> load_known_triples(const std::vector<std::filesystem::path>& edge_paths,
                                           const entity_space& space,
                                           const storage::dataset_id* expected_id = nullptr);

struct filtered_options {
  /// Test edges scored per callback call: memory is batch_size x (entities
  /// of the largest partition) floats per thread.
  std::int64_t batch_size = 1000;
  int threads = 1;
  bool rank_lhs = true, rank_rhs = true;
};

struct filtered_result {
  eval_stats stats;
  /// Per test edge, in input order; 0 for a side not ranked.
  std::vector<std::int64_t> lhs_rank, rhs_rank;
};

/// A batch size whose score matrix ([batch, entities] floats per thread)
/// stays under `bytes_per_thread`, at least 1 and at most `max_batch`.
std::int64_t filtered_batch_size(std::int64_t entities, std::size_t bytes_per_thread, std::int64_t max_batch = 1000);

/// Ranks every test edge on both sides. Per side: rank = 1 + #{candidates c of
/// the side's type: c is not the true entity, (c replacing it) is not a known
/// true triple, score(c) >= score(true)}; AUC per (edge, side) = the fraction
/// of those candidates scoring < score(true). Edges are grouped by relation,
/// side and the partition of their true entity, and scored in batches of
/// options.batch_size, spread over options.threads. Each `score` call gets
/// the candidates of one partition of the type (global ids): first every
/// batch's own partition, which gives the positive scores, then the other
/// partitions one after another, so a table bigger than memory is read a
/// partition at a time. A positive scoring NaN gets the worst rank. Errors
/// thrown by `score` (or a score matrix of the wrong shape) come back as an
/// error.
expected<filtered_result> filtered_rank(std::span<const triple> test, const known_triples& known,
                                        const entity_space& space, const score_fn& score,
                                        const filtered_options& options);

} // namespace abg::eval
