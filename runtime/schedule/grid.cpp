#include "runtime/schedule/grid.h"

#include <algorithm>
#include <set>
#include <string>

namespace abg::schedule {

grid grid_of(const config& cfg) {
  grid g;
  std::set<std::string> lhs, rhs;
  for (auto& r : cfg.relations) {
    lhs.insert(r.lhs);
    rhs.insert(r.rhs);
  }
  for (auto& [name, e] : cfg.entities) {
    const auto parts = static_cast<std::int32_t>(e.num_partitions);
    if (lhs.contains(name)) g.lhs = std::max(g.lhs, parts);
    if (rhs.contains(name)) g.rhs = std::max(g.rhs, parts);
    if (parts > 1 && lhs.contains(name) && rhs.contains(name)) g.shared = true;
  }
  return g;
}

} // namespace abg::schedule
