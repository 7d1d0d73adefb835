// What each partition of a run must look like (its entity count,
// dimension and optimizer state), so that a partition server and its bulk channel refuse a put
// that does not fit the partition it names before taking any memory: a
// peer's claim is checked against the model, not only against limits.
#pragma once

#include <cstdint>
#include <map>
#include <memory>

#include "abg/error.h"
#include "messages/payloads.h"
#include "runtime/train/plan.h"

namespace abg::actors {

struct table_shape {
  std::uint64_t rows = 0;
  std::int64_t dim = 0;
  std::int64_t state_width = 1; // optimizer state values per row (model_desc::state_width)
};

/// Every table of a run; shared by a node's partition server and bulk channel.
using partition_shapes = std::map<msg::partition_key, table_shape>;

std::shared_ptr<const partition_shapes> shapes_of(const train::plan& p);

/// Whether a put of `rows` rows of `dim` with `state_width` optimizer
/// values per row fits partition `key`; `shapes` null (a server outside a
/// run, in tests) accepts any.
expected<void> check_put(const partition_shapes* shapes, const msg::partition_key& key, std::uint64_t rows,
                         std::int64_t dim, std::int64_t state_width);

} // namespace abg::actors
