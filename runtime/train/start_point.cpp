#include "runtime/train/start_point.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace abg::train {

expected<start_point> open_start(const plan& p, const std::function<void(const std::string&)>& log) {
  start_point s;
  auto params = model::shared_params::init(p.model);
  const auto& cfg = *p.cfg;
  if (!storage::committed_checkpoint_versions(cfg.checkpoint_path).empty()) {
    auto r = storage::checkpoint_reader::open(cfg.checkpoint_path, p.meta.id);
    if (!r)
      return std::unexpected(r.error());
    s.reader.emplace(std::move(*r));
    s.resume = true;
  } else if (cfg.init_path) {
    auto r = storage::checkpoint_reader::open(*cfg.init_path, p.meta.id);
    if (!r)
      return std::unexpected(r.error());
    s.reader.emplace(std::move(*r));
  }
  if (s.reader) {
    if (auto ok = s.reader->check_schema(storage::checkpoint_schema(cfg)); !ok && s.resume)
      return fail("{} holds a checkpoint of another model: {}", cfg.checkpoint_path, ok.error().message);
    auto shared = s.reader->shared();
    if (!shared)
      return std::unexpected(shared.error());
    // init_path may predate an import that added dynamic relation types:
    // those start at their initial values.
    auto loaded = params.load(*shared, !s.resume && p.model.dynamic);
    if (!loaded)
      return s.resume ? std::unexpected(loaded.error())
                      : fail("init_path {}: {} (init_path must hold the same model: same relations and operators)",
                             *cfg.init_path, loaded.error().message);
    if (*loaded > 0 && log)
      log(fmt::format("{} relation type(s) added since init_path start with fresh parameters", *loaded));
    if (s.resume) {
      const auto& at = s.reader->manifest().position;
      s.first_iteration = p.iteration_of(at) + (at.mid_iteration() ? 0 : 1);
      s.next_version = s.reader->version() + 1;
      for (const auto& [lhs, rhs] : at.buckets_done)
        if (lhs < 0 || rhs < 0 || lhs >= p.nparts_lhs || rhs >= p.nparts_rhs)
          return fail("checkpoint version {} of {} lists bucket ({}, {}) as done, off this config's {}x{} grid",
                      s.reader->version(), cfg.checkpoint_path, lhs, rhs, p.nparts_lhs, p.nparts_rhs);
      s.buckets_done = at.buckets_done;
      if (log)
        log(at.mid_iteration()
              ? fmt::format("resuming from checkpoint version {} ({} of {} iterations done, and {} of {} buckets "
                            "of the next)",
                            s.reader->version(), s.first_iteration, p.iterations, at.buckets_done.size(),
                            static_cast<std::int64_t>(p.nparts_lhs) * p.nparts_rhs)
              : fmt::format("resuming from checkpoint version {} ({} of {} iterations done)", s.reader->version(),
                            s.first_iteration, p.iterations));
    } else if (log) {
      log(fmt::format("starting from init_path {} (version {})", *cfg.init_path, s.reader->version()));
    }
  }
  s.shared = params.to_checkpoint();
  return s;
}

expected<model::table> initial_table(const plan& p, const start_point& s, type_partition t, std::uint64_t seed) {
  // The table's index in all_tables() order seeds it, as when all are made in one pass.
  std::uint64_t index = 0;
  for (std::size_t u = 0; u < t.type; ++u)
    index += static_cast<std::uint64_t>(p.type_partitions[u]);
  index += static_cast<std::uint64_t>(t.part);
  const auto count = p.count(t);
  const auto dim = p.dim(t.type);
  const auto width = p.model.state_width(t.type);
  auto table = model::init_table(count, dim, p.model.init_scale, seed + 1 + index, width);
  if (!s.reader || !s.reader->manifest().table(p.type_name(t.type), t.part))
    return table;
  auto old = s.reader->embeddings(p.type_name(t.type), t.part);
  auto state = s.reader->optimizer(p.type_name(t.type), t.part);
  if (!old || !state)
    return std::unexpected(!old ? old.error() : state.error());
  auto old_rows = old->shape.empty() ? 0 : old->shape[0];
  if (old_rows > count || (old->shape.size() == 2 && old->shape[1] != dim))
    return fail("checkpoint table {}/{} has shape [{}] but the entity path holds {} rows of dimension {}",
                p.type_name(t.type), t.part, fmt::join(old->shape, ", "), count, dim);
  // Entities added by a later import (appended, ids never move) keep their fresh init.
  table.embeddings.narrow(0, 0, old_rows).copy_(torch::from_blob(old->data.data(), {old_rows, dim}, torch::kFloat32));
  // A checkpoint of the other entity_optimizer gives its state converted.
  const auto old_state = torch::from_blob(state->data.data(), {static_cast<std::int64_t>(state->data.size())},
                                          torch::kFloat32);
  table.state.narrow(0, 0, old_rows).copy_(model::state_as(old_state, old_rows, width));
  return table;
}

} // namespace abg::train
