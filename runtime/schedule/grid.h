// The bucket grid of a config: partitions per side (the largest number among
// the partitioned entity types used on that side) and whether one
// partitioned type is on both sides (then partition k of either side is one
// lock).
#pragma once

#include <cstdint>

#include "abg/config.h"

namespace abg::schedule {

struct grid {
  std::int32_t lhs = 1, rhs = 1;
  bool shared = false;
};

grid grid_of(const config& cfg);

} // namespace abg::schedule
