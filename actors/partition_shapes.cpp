#include "actors/partition_shapes.h"

#include <fmt/format.h>

namespace abg::actors {

std::shared_ptr<const partition_shapes> shapes_of(const train::plan& p) {
  auto out = std::make_shared<partition_shapes>();
  for (auto t : p.all_tables())
    (*out)[{p.type_name(t.type), static_cast<std::int32_t>(t.part)}] = {static_cast<std::uint64_t>(p.count(t)),
                                                                        p.dim(t.type), p.model.state_width(t.type)};
  return out;
}

expected<void> check_put(const partition_shapes* shapes, const msg::partition_key& key, std::uint64_t rows,
                         std::int64_t dim, std::int64_t state_width) {
  if (!shapes) return {};
  auto it = shapes->find(key);
  if (it == shapes->end())
    return fail("a put of partition {}: this run has no such partition (entity type '{}', part {})",
                msg::to_string(key), key.entity, key.part);
  if (rows != it->second.rows || dim != it->second.dim)
    return fail("a put of partition {}: {} rows of dimension {}, but the partition holds {} entities of dimension {}",
                msg::to_string(key), rows, dim, it->second.rows, it->second.dim);
  if (state_width != it->second.state_width)
    return fail("a put of partition {}: {} optimizer values per row, but this run's entity_optimizer keeps {}",
                msg::to_string(key), state_width, it->second.state_width);
  return {};
}

} // namespace abg::actors
