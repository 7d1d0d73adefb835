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

expected<void> put_held_table(storage::checkpoint_writer& w, const std::string& type, std::int64_t part,
                         const msg::tensor& emb, const msg::tensor& state) {
  if (emb.shape.size() != 2 || state.shape.empty() || state.shape.size() > 2 || state.shape[0] != emb.shape[0])
    return fail("table {}/{} came with shapes that do not fit together", type, part);
  if (auto ok = w.put_embeddings(type, part, emb.values(), emb.shape[0], emb.shape[1]); !ok)
    return ok;
  return w.put_optimizer(type, part, state.values());
}

// What each partition server holds of each of its tables (version, shape).
expected<std::map<msg::partition_key, msg::partition_info>> stored_tables(caf::actor_system& sys,
                                                                         const checkpoint_sources& sources,
                                                                         caf::timespan deadline) {
  std::map<msg::partition_key, msg::partition_info> out;
  for (auto& server : sources.partition_servers) {
    blocking_peer peer(sys, server.actor, deadline);
    auto listed = peer.ask<std::vector<msg::partition_info>>("cannot list a partition server", msg::list_atom::value);
    if (!listed)
      return std::unexpected(listed.error());
    for (auto& info : *listed)
      out[info.key] = info;
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
  auto stored = stored_tables(sys, sources, deadline);
  if (!stored)
    return std::unexpected(stored.error());
  const bool local = p.cfg->checkpoint_mode == "local";
  std::vector<table_to_save> to_save; // local: written by the partition servers
  std::vector<storage::checkpoint_table> saved;
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
      if (auto ok = put_held_table(*w, type, t.part, emb->second, state->second); !ok)
        return std::unexpected(ok.error());
      ++out.tables_written;
      continue;
    }
    msg::partition_key key{type, static_cast<int32_t>(t.part)};
    auto now = stored->find(key);
    auto then = last.versions.find(key);
    if (now != stored->end() && then != last.versions.end() && then->second == now->second.version && last.manifest) {
      auto kept = w->keep_table(*last.manifest, type, t.part);
      if (!kept)
        return std::unexpected(kept.error());
      if (*kept) {
        out.committed.versions[key] = now->second.version;
        ++out.tables_kept;
        continue;
      }
    }
    // A partition server in this process writes the table into this very
    // checkpoint path itself, or links its store's files there
    // (buffer_capacity): nothing crosses to this actor, and a store's
    // partitions are not copied.
    const auto& server = server_of(sources.partition_servers, t.part);
    if (local || server.bulk.empty()) {
      if (now == stored->end())
        return fail("no partition server holds table {}; nothing was committed", msg::to_string(key));
      to_save.push_back({key, now->second.version});
      saved.push_back({type, t.part, static_cast<std::int64_t>(now->second.rows), now->second.dim, "", "",
                       p.model.state_width(t.type)});
      out.committed.versions[key] = now->second.version;
      ++out.tables_written;
      continue;
    }
    // A server on another node: its partition streams into this node's
    // files a chunk at a time, never whole in this process's memory.
    std::optional<storage::checkpoint_writer::table_stream> stream;
    table_sink sink{[&](std::uint64_t rows, std::int64_t dim, std::int64_t width) -> expected<void> {
                      auto s = w->begin_table(type, t.part, static_cast<std::int64_t>(rows), dim, width);
                      if (!s) return std::unexpected(s.error());
                      stream.emplace(std::move(*s));
                      return {};
                    },
                    [&](std::span<const float> values) { return w->append_table(*stream, values); }};
    auto version = stream_table(sys, server, key, 0, deadline, sink, traffic::kind::checkpoints);
    if (!version)
      return std::unexpected(version.error());
    if (auto ok = w->put_table(std::move(*stream)); !ok)
      return std::unexpected(ok.error());
    out.committed.versions[key] = *version;
    ++out.tables_written;
  }
  const local_servers servers{sources.partition_servers, sources.server_nodes};
  if (!to_save.empty()) {
    std::vector<bool> linked;
    auto files = save_local_tables(sys, servers, to_save, request.version, p.cfg->checkpoint_replicas > 0, deadline,
                                   &linked);
    if (!files)
      return std::unexpected(files.error());
    for (std::size_t i = 0; i < saved.size(); ++i) {
      // gather: the files are in this node's checkpoint path, as if written here
      if (!local)
        for (auto& f : (*files)[i]) f.nodes.clear();
      if (linked[i]) ++out.tables_linked;
      if (auto ok = w->put_server_table(saved[i], (*files)[i][0], (*files)[i][1]); !ok)
        return std::unexpected(ok.error());
    }
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
  // like the version it describes. A version committed mid-iteration adds
  // none: the iteration's line comes when it is done.
  if (!request.position.mid_iteration())
    if (auto ok = storage::append_durable(std::filesystem::path(p.cfg->checkpoint_path) / "training_stats.json",
                                          request.stats.dump() + "\n");
        !ok)
      return std::unexpected(ok.error());
  // Other nodes drop the table files no kept version lists any more (as the
  // commit just did here); none while a manifest here cannot be read.
  if (local) {
    auto keep = storage::listed_table_files(p.cfg->checkpoint_path);
    if (!keep)
      out.log.push_back("not pruning the partition servers' table files: " + keep.error().message);
    else
      for (auto& line : prune_local_tables(sys, servers, *keep, deadline))
        out.log.push_back("table files left behind: " + line);
  }
  return out;
}

} // namespace abg::actors
