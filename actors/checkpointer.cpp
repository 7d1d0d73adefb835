#include "actors/checkpointer.h"

#include <filesystem>
#include <map>
#include <optional>

#include <fmt/format.h>

#include "abg/storage/files.h"
#include "actors/blocking_peer.h"
#include "actors/param_sharer.h"
#include "actors/partition_client.h"
#include "actors/server_seeding.h"

namespace abg::actors {

namespace {

// Every named tensor the trainers hold, each from the first trainer that has it.
expected<std::map<std::string, msg::tensor>> gather_shared(caf::actor_system& sys, const checkpoint_sources& sources,
                                                          caf::timespan deadline) {
  std::map<std::string, msg::tensor> out;
  std::size_t answered = 0;
  for (auto& t : sources.trainers) {
    std::vector<std::string> skip;
    for (auto& [name, v] : out)
      skip.push_back(name);
    blocking_peer peer(sys, t, deadline);
    auto got = peer.ask<std::vector<msg::named_tensor>>("shared parameters", msg::shared_atom::value, std::move(skip));
    if (!got)
      continue; // a trainer lost meanwhile: the next one has the same
    ++answered;
    for (auto& n : *got)
      out.emplace(std::move(n.name), std::move(n.value));
  }
  if (answered == 0)
    return fail("no trainer answered for the shared parameters; nothing was committed");
  return out;
}

expected<void> put_table(storage::checkpoint_writer& w, const std::string& type, std::int64_t part,
                         const msg::tensor& emb, const msg::tensor& state) {
  if (emb.shape.size() != 2 || state.shape.size() != 1 || state.shape[0] != emb.shape[0])
    return fail("table {}/{} came with shapes that do not fit together", type, part);
  if (auto ok = w.put_embeddings(type, part, emb.values(), emb.shape[0], emb.shape[1]); !ok)
    return ok;
  return w.put_optimizer(type, part, state.values());
}

// The version each partition server holds of each of its tables.
expected<std::map<msg::partition_key, std::uint64_t>> stored_versions(caf::actor_system& sys,
                                                                     const checkpoint_sources& sources,
                                                                     caf::timespan deadline) {
  std::map<msg::partition_key, std::uint64_t> out;
  for (auto& server : sources.partition_servers) {
    blocking_peer peer(sys, server.actor, deadline);
    auto listed = peer.ask<std::vector<msg::partition_info>>("cannot list a partition server", msg::list_atom::value);
    if (!listed)
      return std::unexpected(listed.error());
    for (auto& info : *listed)
      out[info.key] = info.version;
  }
  return out;
}

} // namespace

expected<commit_outcome> commit_checkpoint(caf::actor_system& sys, const train::plan& p, const std::string& config_toml,
                                           const commit_request& request, const checkpoint_sources& sources,
                                           const committed_tables& last, caf::timespan deadline) {
  auto held = gather_shared(sys, sources, deadline);
  if (!held)
    return std::unexpected(held.error());
  auto stored = stored_versions(sys, sources, deadline);
  if (!stored)
    return std::unexpected(stored.error());
  commit_outcome out;
  auto settings = storage::checkpoint_settings::from(*p.cfg, p.meta.id, config_toml);
  auto w = storage::checkpoint_writer::begin(p.cfg->checkpoint_path, request.version, std::move(settings));
  if (!w)
    return std::unexpected(w.error());
  for (auto t : p.all_tables()) {
    const auto& type = p.type_name(t.type);
    auto emb = held->find(shared_table_name(type));
    auto state = held->find(shared_table_state_name(type));
    if (p.unpartitioned(t.type) && emb != held->end() && state != held->end()) {
      if (auto ok = put_table(*w, type, t.part, emb->second, state->second); !ok)
        return std::unexpected(ok.error());
      ++out.tables_written;
      continue;
    }
    msg::partition_key key{type, static_cast<int32_t>(t.part)};
    auto now = stored->find(key);
    auto then = last.versions.find(key);
    if (now != stored->end() && then != last.versions.end() && then->second == now->second && last.manifest) {
      auto kept = w->keep_table(*last.manifest, type, t.part);
      if (!kept)
        return std::unexpected(kept.error());
      if (*kept) {
        out.committed.versions[key] = now->second;
        ++out.tables_kept;
        continue;
      }
    }
    auto got = fetch_table(sys, server_of(sources.partition_servers, t.part), key, 0, deadline, nullptr,
                           traffic::kind::checkpoints);
    if (!got)
      return std::unexpected(got.error());
    out.committed.versions[key] = got->version;
    ++out.tables_written;
    auto e = got->table.embeddings.contiguous();
    auto s = got->table.state.contiguous();
    if (auto ok = w->put_embeddings(type, t.part, std::span<const float>(e.data_ptr<float>(), static_cast<std::size_t>(e.numel())),
                                    e.size(0), e.size(1));
        !ok)
      return std::unexpected(ok.error());
    if (auto ok = w->put_optimizer(type, t.part, std::span<const float>(s.data_ptr<float>(), static_cast<std::size_t>(s.numel())));
        !ok)
      return std::unexpected(ok.error());
  }
  auto& shared = out.shared;
  for (auto& [name, v] : *held) {
    if (name.starts_with("table.") || name.starts_with("table_state."))
      continue;
    auto values = v.values();
    if (auto ok = shared.add(name, v.shape, values); !ok)
      return std::unexpected(ok.error());
    if (auto ok = w->put_shared(name, v.shape, values); !ok)
      return std::unexpected(ok.error());
  }
  auto committed = w->commit(request.position, request.stats);
  if (!committed)
    return std::unexpected(committed.error());
  out.committed.manifest = std::move(*committed);
  // training_stats.json: one JSON object per line, as PBG writes it; synced
  // like the version it describes.
  if (auto ok = storage::append_durable(std::filesystem::path(p.cfg->checkpoint_path) / "training_stats.json",
                                        request.stats.dump() + "\n");
      !ok)
    return std::unexpected(ok.error());
  return out;
}

} // namespace abg::actors
