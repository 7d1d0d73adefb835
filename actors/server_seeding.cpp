#include "actors/server_seeding.h"

#include <optional>

#include <fmt/format.h>

#include "actors/blocking_peer.h"
#include "actors/param_sharer.h"
#include "actors/partition_client.h"

namespace abg::actors {

namespace {

template <class Handle>
expected<void> clear(caf::actor_system& sys, const Handle& h, caf::timespan deadline, const char* what) {
  blocking_peer peer(sys, h, deadline);
  auto ok = peer.template ask<bool>(fmt::format("cannot clear a {}", what), msg::clear_atom::value);
  if (!ok)
    return std::unexpected(ok.error());
  return {};
}

} // namespace

expected<std::uint64_t> seed_servers(caf::actor_system& sys, const train::plan& p, const train::start_point& start,
                                     std::uint64_t seed, std::uint64_t version, const seed_targets& targets,
                                     caf::timespan deadline) {
  for (auto& s : targets.partition_servers)
    if (auto ok = clear(sys, s.actor, deadline, "partition server"); !ok)
      return std::unexpected(ok.error());
  for (auto& s : targets.parameter_servers)
    if (auto ok = clear(sys, s, deadline, "parameter server"); !ok)
      return std::unexpected(ok.error());
  std::uint64_t bytes = 0;
  const bool share = !targets.parameter_servers.empty();
  for (auto t : p.all_tables()) {
    auto table = train::initial_table(p, start, t, seed);
    if (!table)
      return std::unexpected(table.error());
    msg::partition_key key{p.type_name(t.type), static_cast<int32_t>(t.part)};
    if (auto ok = store_table(sys, server_of(targets.partition_servers, t.part), key, *table, version,
                              msg::any_version, deadline, nullptr, traffic::kind::checkpoints);
        !ok)
      return std::unexpected(ok.error());
    bytes += static_cast<std::uint64_t>(table->embeddings.numel() + table->state.numel()) * sizeof(float);
    if (share && p.unpartitioned(t.type)) {
      auto e = table->embeddings.contiguous();
      if (auto ok = param_sharer::initialise(sys, targets.parameter_servers, shared_table_name(p.type_name(t.type)),
                                             e.data_ptr<float>(), e.numel(), deadline);
          !ok)
        return std::unexpected(ok.error());
    }
  }
  if (share) {
    auto params = model::shared_params::init(p.model);
    if (auto ok = params.load(start.shared); !ok)
      return std::unexpected(ok.error());
    for (auto& [name, t] : param_sharer::shared_tensors(params)) {
      auto c = t.contiguous();
      if (auto ok = param_sharer::initialise(sys, targets.parameter_servers, name, c.data_ptr<float>(), c.numel(),
                                             deadline);
          !ok)
        return std::unexpected(ok.error());
    }
  }
  return bytes;
}

} // namespace abg::actors
