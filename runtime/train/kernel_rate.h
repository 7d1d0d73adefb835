// One trainer's kernel speed from a short run: the bucket kernel (abg/model/
// kernel.h) trains random edges of the config's relations on random tables
// shaped like its partitions, with its model, batch size and workers. This is
// the edges/s `abg simulate` models a trainer with (docs/scaling.md). Torch
// and math only: no actors, no files.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "abg/config.h"
#include "abg/error.h"

namespace abg::train {

struct kernel_rate {
  double edges_per_second = 0;
  std::int64_t edges = 0;  // trained in the timed part (after one warm-up pass)
  double seconds = 0;      // of the timed part
  std::int64_t workers = 1;
  /// The tables were smaller than the partitions asked for (a table holds at
  /// most max_rate_table_bytes); with 1-vs-all relations, whose cost per edge
  /// grows with the partition, the rate is scaled by rows / asked.
  bool capped = false;
};

/// The most bytes (embeddings and optimizer state) one table of a short run takes.
inline constexpr std::int64_t max_rate_table_bytes = std::int64_t{256} << 20;

/// Trains for about `seconds` (timed after a warm-up pass) on a table per
/// entity type of `rows` rows (its largest partition's count; a type not
/// listed, or with fewer than 2 rows, is an error); `relation_ids`: the
/// relation types to draw (with dynamic relations, the imported count). Each
/// call of the kernel trains `bucket_edges` edges (a bucket's, so that its
/// per-call costs count as in an epoch; 0: about half a second's worth).
expected<kernel_rate> measure_kernel_rate(const config& cfg, const std::map<std::string, std::int64_t>& rows,
                                          std::int64_t relation_ids, std::int64_t bucket_edges, double seconds);

} // namespace abg::train
