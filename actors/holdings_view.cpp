#include "actors/holdings_view.h"

#include <map>
#include <utility>

namespace abg::actors {

using json = nlohmann::json;

std::uint64_t table_bytes(const msg::partition_info& t) {
  return t.rows * static_cast<std::uint64_t>(t.dim + t.state_width) * sizeof(float);
}

json partition_rows(const std::vector<node_holdings>& nodes) {
  std::map<std::pair<std::string, std::int32_t>, json> rows;
  auto row_of = [&](const msg::partition_info& t) -> json& {
    auto& row = rows[{t.key.entity, t.key.part}];
    if (row.is_null())
      row = {{"entity", t.key.entity}, {"part", t.key.part}, {"rows", t.rows}, {"dim", t.dim},
             {"bytes", table_bytes(t)}, {"stored_on", json::array()}, {"held_by", json::array()}};
    return row;
  };
  for (const auto& n : nodes) {
    if (n.stored)
      for (const auto& t : *n.stored) row_of(t)["stored_on"].push_back({{"node", n.name}, {"version", t.version}});
    if (n.trainer_status)
      for (const auto& t : n.trainer_status->held)
        row_of(t)["held_by"].push_back({{"node", n.name}, {"trainer", *n.trainer}, {"version", t.version}});
  }
  json out = json::array();
  for (auto& [key, row] : rows) out.push_back(std::move(row));
  return {{"partitions", std::move(out)}};
}

json param_rows(const std::vector<node_holdings>& nodes) {
  json out = json::array();
  for (const auto& n : nodes) {
    if (!n.shard) continue;
    const auto& s = *n.shard;
    const double per = s.seconds > 0 ? 1 / s.seconds : 0.0;
    out.push_back({{"node", n.name},
                   {"names", s.names},
                   {"bytes", s.bytes},
                   {"pushes", s.pushes},
                   {"pulls", s.pulls},
                   {"pushed_bytes", s.pushed_bytes},
                   {"pulled_bytes", s.pulled_bytes},
                   {"seconds", s.seconds},
                   {"pushes_per_second", static_cast<double>(s.pushes) * per},
                   {"pulls_per_second", static_cast<double>(s.pulls) * per}});
  }
  return {{"shards", std::move(out)}};
}

held_bytes held_by(const node_holdings& node) {
  held_bytes out;
  if (node.stored)
    for (const auto& t : *node.stored) out.partitions += table_bytes(t);
  if (node.trainer_status) {
    for (const auto& t : node.trainer_status->held) out.partitions += table_bytes(t);
    out.parameters += node.trainer_status->parameter_bytes;
  }
  if (node.shard) out.parameters += node.shard->bytes;
  return out;
}

} // namespace abg::actors
