#include "actors/server_seeding.h"

#include <array>
#include <filesystem>
#include <optional>

#include <fmt/format.h>

#include "abg/storage/checkpoint_map.h"
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

using table_files = std::array<const storage::checkpoint_file*, 2>;

// The start checkpoint's files of table `t` when the table fits the run as
// it is, its optimizer state included (else initial_table reads it,
// converting the state, or says where it is).
std::optional<table_files> fitting_files(const train::plan& p, const train::start_point& start,
                                         train::type_partition t) {
  if (!start.reader) return std::nullopt;
  const auto& m = start.reader->manifest();
  const auto* table = m.table(p.type_name(t.type), t.part);
  if (table == nullptr || table->rows != p.count(t) || table->dim != p.dim(t.type) || table->optimizer_file.empty() ||
      table->state_width != p.model.state_width(t.type))
    return std::nullopt;
  table_files files{m.file(table->embeddings_file), m.file(table->optimizer_file)};
  if (files[0] == nullptr || files[1] == nullptr) return std::nullopt;
  return files;
}

// Those files when checkpoint_mode = "local" left them on other nodes and not here.
std::optional<table_files> elsewhere(const train::plan& p, const train::start_point& start, train::type_partition t) {
  auto files = fitting_files(p, start, t);
  if (!files) return std::nullopt;
  for (auto* f : *files) {
    std::error_code ec;
    if (f->nodes.empty() || std::filesystem::exists(start.reader->path_of(f->name), ec)) return std::nullopt;
  }
  return files;
}

// Those files when a partition server in this process keeps partitions on
// disk (buffer_capacity) and they are in its checkpoint path: it links them
// into its store instead of this process reading them and sending them.
std::optional<table_files> linkable(const train::plan& p, const train::start_point& start, train::type_partition t,
                                    const partition_server_ref& server) {
  if (p.cfg->buffer_capacity == 0 || !server.bulk.empty() || p.unpartitioned(t.type)) return std::nullopt;
  auto files = fitting_files(p, start, t);
  if (!files) return std::nullopt;
  for (auto* f : *files) {
    std::error_code ec;
    if (!std::filesystem::equivalent(start.reader->path_of(f->name), std::filesystem::path(p.cfg->checkpoint_path) / f->name,
                                     ec))
      return std::nullopt;
  }
  return files;
}

// A table of the start checkpoint that fits the run, for a server on another
// node: its files mapped, so it goes out from the page cache and is never
// copied into this process's memory (a table may be larger than that).
struct mapped_start_table {
  storage::mapped_tensor embeddings, state;
  // Views of the read-only mappings: sending only reads them.
  model::table view() const {
    auto of = [](const storage::mapped_tensor& m) {
      return torch::from_blob(const_cast<float*>(m.values.data()), m.shape, torch::kFloat32);
    };
    return {of(embeddings), of(state)};
  }
};

expected<mapped_start_table> map_start_table(const train::plan& p, const train::start_point& start,
                                             train::type_partition t) {
  auto emb = storage::map_embeddings(*start.reader, p.type_name(t.type), t.part);
  if (!emb) return std::unexpected(emb.error());
  auto state = storage::map_optimizer(*start.reader, p.type_name(t.type), t.part);
  if (!state) return std::unexpected(state.error());
  return mapped_start_table{std::move(*emb), std::move(*state)};
}

} // namespace

expected<seeded_tables> seed_servers(caf::actor_system& sys, const train::plan& p, const train::start_point& start,
                                     std::uint64_t seed, std::uint64_t version, const seed_targets& targets,
                                     caf::timespan deadline) {
  for (auto& s : targets.partition_servers)
    if (auto ok = clear(sys, s.actor, deadline, "partition server"); !ok)
      return std::unexpected(ok.error());
  for (auto& s : targets.parameter_servers)
    if (auto ok = clear(sys, s, deadline, "parameter server"); !ok)
      return std::unexpected(ok.error());
  std::uint64_t bytes = 0;
  std::int32_t linked = 0;
  const bool share = !targets.parameter_servers.empty();
  const local_servers servers{targets.partition_servers, targets.server_nodes};
  for (auto t : p.all_tables()) {
    msg::partition_key key{p.type_name(t.type), static_cast<int32_t>(t.part)};
    if (auto files = elsewhere(p, start, t)) {
      const auto target = static_cast<std::size_t>(t.part) % servers.refs.size();
      if (auto ok = restore_local_table(sys, servers, key, version, *files, target, deadline); !ok)
        return std::unexpected(ok.error());
      bytes += (*files)[0]->bytes + (*files)[1]->bytes;
      if (!(share && p.unpartitioned(t.type)))
        continue;
      // The shared copy starts from the table as restored.
      auto got = fetch_table(sys, servers.refs[target], key, version, deadline, nullptr, traffic::kind::checkpoints);
      if (!got)
        return std::unexpected(got.error());
      auto e = got->table.embeddings.contiguous();
      if (auto ok = param_sharer::initialise(sys, targets.parameter_servers, shared_table_name(key.entity),
                                             e.data_ptr<float>(), e.numel(), deadline);
          !ok)
        return std::unexpected(ok.error());
      continue;
    }
    if (auto files = linkable(p, start, t, server_of(targets.partition_servers, t.part))) {
      if (auto ok = restore_own_table(sys, server_of(targets.partition_servers, t.part).actor, key, version, *files,
                                      deadline);
          !ok)
        return std::unexpected(ok.error());
      bytes += (*files)[0]->bytes + (*files)[1]->bytes;
      ++linked;
      continue;
    }
    const auto& server = server_of(targets.partition_servers, t.part);
    std::optional<mapped_start_table> mapped; // while `table` views it
    auto table = [&]() -> expected<model::table> {
      if (server.bulk.empty() || !fitting_files(p, start, t)) return train::initial_table(p, start, t, seed);
      auto m = map_start_table(p, start, t);
      if (!m) return std::unexpected(m.error());
      mapped = std::move(*m);
      return mapped->view();
    }();
    if (!table)
      return std::unexpected(table.error());
    if (auto ok = store_table(sys, server, key, *table, version, msg::any_version, deadline, nullptr,
                              traffic::kind::checkpoints);
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
  return seeded_tables{bytes, linked};
}

} // namespace abg::actors
