// Partition loads of a bucket order for a trainer that holds at most
// `capacity` partitions (a partition buffer, as Marius has and issue
// "Bigger than memory" asks): what an order costs in reads from the
// partition server or the disk, and an order that keeps that low.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/schedule/bucket_scheduler.h"

namespace abg::schedule {

/// Which resident partition makes room: the least recently used (what a
/// buffer that does not know the order can do), or the one needed again
/// last (Belady's, the fewest loads possible for the order).
enum class eviction : uint8_t { least_recently_used, needed_last };

/// Loads of one epoch in `order` from an empty buffer of `capacity` (>= 2)
/// partitions, never evicting one the current bucket needs. Bucket (i, j)
/// needs lhs partition i and rhs partition j; with shared partitions (one
/// entity type on both sides) partition k of either side is one partition.
std::int64_t count_loads(const std::vector<bucket>& order, int32_t capacity, bool shared_partitions,
                         eviction policy = eviction::least_recently_used);

/// A bucket order for such a buffer, after Marius' BETA: the partitions (of
/// the lhs side, without shared partitions) in groups of capacity - 1 that
/// stay in the buffer while the last slot cycles through the partitions they
/// have not met yet, ending on the next group's first members so that the
/// buffer moves on with as few loads as it can. Every bucket exactly once.
std::vector<bucket> make_buffer_order(int32_t nparts_lhs, int32_t nparts_rhs, int32_t capacity,
                                      bool shared_partitions);

} // namespace abg::schedule
