// Where a run starts: the newest committed checkpoint of checkpoint_path
// (resume), else init_path's, else fresh tables. The coordinator reads the
// shared parameters once and every table one at a time, so the model is
// never whole in one process's memory.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "abg/error.h"
#include "abg/model/model.h"
#include "abg/storage/checkpoint.h"
#include "runtime/train/plan.h"

namespace abg::train {

struct start_point {
  std::optional<storage::checkpoint_reader> reader; // the checkpoint resumed or init_path; none: fresh
  bool resume = false;
  storage::shared_tensors shared; // shared parameters and their optimizer state, checkpoint names
  std::int64_t first_iteration = 0;
  std::int64_t next_version = 1; // the version the next commit gets
  /// Resumed from a version committed mid-iteration: the buckets of
  /// first_iteration already trained (on the grid, checked).
  std::vector<std::array<std::int32_t, 2>> buckets_done;
};

/// Opens the start point; `log` gets one line about it (may be empty).
expected<start_point> open_start(const plan& p, const std::function<void(const std::string&)>& log);

/// Table `t` as the run starts it: from the start checkpoint where it has the
/// table (entities added by a later import keep their fresh rows), else
/// N(0, 1) * init_scale seeded from (seed, the table's index).
expected<model::table> initial_table(const plan& p, const start_point& s, type_partition t, std::uint64_t seed);

} // namespace abg::train
