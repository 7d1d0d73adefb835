#include "actors/local_tables.h"

#include <map>
#include <optional>

#include <fmt/format.h>

#include "abg/storage/files.h"
#include "abg/storage/tensor_file.h"
#include "actors/blocking_peer.h"

namespace abg::actors {

namespace fs = std::filesystem;

namespace {

constexpr const char* kinds[] = {"embeddings", "optimizer"};

expected<void> usable(const table_store& store) {
  if (store.checkpoint_path.empty())
    return fail("this partition server has no checkpoint path to keep tables in");
  return {};
}

// "tables/NAME" with a plain file name: a name from a message never leaves
// the node's tables folder.
bool table_file_name(const std::string& name) {
  const std::string_view prefix = "tables/";
  if (!name.starts_with(prefix) || !name.ends_with(".abgt")) return false;
  auto rest = std::string_view(name).substr(prefix.size());
  return rest.find('/') == std::string_view::npos && rest.find('\0') == std::string_view::npos &&
         !rest.starts_with(".");
}

} // namespace

expected<std::vector<msg::table_file>> write_table(const table_store& store, const msg::partition_key& key,
                                                   std::int64_t commit, std::span<const std::int64_t> shape,
                                                   std::span<const float> embeddings, std::span<const float> state) {
  if (auto ok = usable(store); !ok) return std::unexpected(ok.error());
  const auto state_size = static_cast<std::int64_t>(state.size());
  if (shape.size() != 2 || static_cast<std::int64_t>(embeddings.size()) != shape[0] * shape[1] ||
      (state_size != shape[0] && state_size != shape[0] * shape[1]))
    return fail("table {} has shapes that do not fit together", msg::to_string(key));
  std::error_code ec;
  fs::create_directories(storage::checkpoint_tables_dir(store.checkpoint_path), ec);
  if (ec)
    return fail("cannot create {}: {}", storage::checkpoint_tables_dir(store.checkpoint_path).string(), ec.message());
  std::vector<msg::table_file> out;
  // Row-wise Adagrad's state [rows], or element-wise Adagrad's [rows, dim].
  const auto state_shape =
    state_size == shape[0] ? std::vector<std::int64_t>{shape[0]} : std::vector<std::int64_t>{shape[0], shape[1]};
  for (const char* kind : kinds) {
    const bool emb = kind == kinds[0];
    auto name = storage::checkpoint_table_file(kind, key.entity, key.part, commit);
    auto values = emb ? embeddings : state;
    auto sum = storage::write_tensor_file(store.checkpoint_path / name, store.dataset,
                                          emb ? shape : std::span<const std::int64_t>(state_shape), values,
                                          {.sync_directory = false});
    if (!sum) return std::unexpected(sum.error());
    out.push_back({name, storage::tensor_header_size + values.size_bytes(), *sum});
  }
  if (auto ok = storage::fsync_directory(storage::checkpoint_tables_dir(store.checkpoint_path)); !ok)
    return std::unexpected(ok.error());
  return out;
}

expected<std::optional<std::vector<msg::table_file>>> link_table(const table_store& store,
                                                                 const msg::partition_key& key, std::int64_t commit,
                                                                 std::uint64_t version,
                                                                 const storage::partition_store& disk) {
  if (auto ok = usable(store); !ok) return std::unexpected(ok.error());
  const auto dir = storage::checkpoint_tables_dir(store.checkpoint_path);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return fail("cannot create {}: {}", dir.string(), ec.message());
  std::array<std::string, 2> names;
  for (std::size_t k = 0; k < 2; ++k) names[k] = storage::checkpoint_table_file(kinds[k], key.entity, key.part, commit);
  auto linked = disk.link_into({key.entity, key.part}, version, store.checkpoint_path / names[0],
                               store.checkpoint_path / names[1]);
  if (!linked) return std::unexpected(linked.error());
  if (!*linked) return std::nullopt;
  std::vector<msg::table_file> out;
  for (std::size_t k = 0; k < 2; ++k) out.push_back({names[k], (**linked)[k].bytes, (**linked)[k].checksum, true});
  return out;
}

expected<bool> adopt_table(const table_store& store, const msg::partition_key& key, std::uint64_t version,
                           const std::vector<msg::table_file>& files, storage::partition_store& disk) {
  if (auto ok = usable(store); !ok) return std::unexpected(ok.error());
  if (files.size() != 2) return fail("a table is two files (embeddings, optimizer), got {}", files.size());
  for (auto& f : files)
    if (!table_file_name(f.name)) return fail("'{}' is not a table file name", f.name);
  auto linked = disk.adopt({key.entity, key.part}, version, store.checkpoint_path / files[0].name,
                           store.checkpoint_path / files[1].name, {files[0].checksum, files[1].checksum});
  if (!linked || *linked) return linked;
  // No hard links there: a copy, read and checked as any restore.
  auto table = read_table(store, files);
  if (!table) return std::unexpected(table.error());
  auto e = table->embeddings.contiguous();
  auto s = table->state.contiguous();
  if (auto ok = disk.store({key.entity, key.part}, version, static_cast<uint64_t>(e.size(0)), e.size(1),
                           {e.data_ptr<float>(), static_cast<std::size_t>(e.numel())},
                           {s.data_ptr<float>(), static_cast<std::size_t>(s.numel())}, s.dim() == 2 ? s.size(1) : 1);
      !ok)
    return std::unexpected(ok.error());
  return false;
}

expected<model::table> read_table(const table_store& store, const std::vector<msg::table_file>& files) {
  if (auto ok = usable(store); !ok) return std::unexpected(ok.error());
  if (files.size() != 2) return fail("a table is two files (embeddings, optimizer), got {}", files.size());
  std::vector<torch::Tensor> parts;
  for (auto& f : files) {
    if (!table_file_name(f.name)) return fail("'{}' is not a table file name", f.name);
    const auto path = store.checkpoint_path / f.name;
    auto header = storage::read_tensor_header(path, store.dataset);
    if (!header) return std::unexpected(header.error());
    if (header->payload_checksum != f.checksum)
      return fail("{}: checksum differs from the checkpoint manifest's: file is corrupt or from another version",
                  path.string());
    auto t = torch::empty(header->shape, torch::kFloat32);
    if (auto ok = storage::read_tensor_file_into(path, store.dataset,
                                                 std::span<float>(t.data_ptr<float>(), static_cast<std::size_t>(t.numel())));
        !ok)
      return std::unexpected(ok.error());
    parts.push_back(std::move(t));
  }
  if (parts[0].dim() != 2 || parts[1].dim() < 1 || parts[1].dim() > 2 || parts[1].size(0) != parts[0].size(0) ||
      (parts[1].dim() == 2 && parts[1].size(1) != parts[0].size(1)))
    return fail("{} and {} do not hold one table", files[0].name, files[1].name);
  return model::table{std::move(parts[0]), std::move(parts[1])};
}

namespace {

using server_peer = blocking_peer<msg::partition_server_actor>;

storage::checkpoint_file entry_of(const msg::table_file& f, const std::string& node) {
  return {f.name, f.bytes, f.checksum, {node}};
}

} // namespace

expected<std::vector<std::array<storage::checkpoint_file, 2>>> save_local_tables(
  caf::actor_system& sys, const local_servers& servers, const std::vector<table_to_save>& tables,
  std::int64_t commit, bool replicas, caf::timespan deadline, std::vector<bool>* linked) {
  const auto count = servers.refs.size();
  std::vector<std::array<storage::checkpoint_file, 2>> out(tables.size());
  if (linked) linked->assign(tables.size(), false);
  // One round per copy: every server writes at once (its requests queued in
  // order on its peer), the replicas after the files they copy are complete.
  const std::size_t rounds = replicas && count > 1 ? 2 : 1;
  for (std::size_t round = 0; round < rounds; ++round) {
    std::vector<std::optional<server_peer>> peers(count);
    std::vector<std::vector<std::size_t>> asked(count);
    for (std::size_t i = 0; i < tables.size(); ++i) {
      const auto holder = static_cast<std::size_t>(tables[i].key.part) % count;
      const auto writer = (holder + round) % count;
      msg::table_save job{tables[i].key, tables[i].version, commit, {}, {}};
      if (round > 0) {
        job.source = {caf::actor_cast<caf::actor>(servers.refs[holder].actor)};
        job.source_bulk = servers.nodes[holder].bulk;
      }
      if (!peers[writer]) peers[writer].emplace(sys, servers.refs[writer].actor, deadline);
      peers[writer]->send(msg::save_atom::value, std::move(job));
      asked[writer].push_back(i);
    }
    for (std::size_t s = 0; s < count; ++s) {
      for (auto i : asked[s]) {
        auto files = peers[s]->next<std::vector<msg::table_file>>(
          fmt::format("node {} writing table {} into its checkpoint path", servers.nodes[s].name,
                      msg::to_string(tables[i].key)));
        if (!files) return std::unexpected(files.error());
        if (files->size() != 2)
          return fail("node {} answered {} files for table {}", servers.nodes[s].name, files->size(),
                      msg::to_string(tables[i].key));
        for (std::size_t k = 0; k < 2; ++k) {
          auto& f = (*files)[k];
          if (round == 0) {
            out[i][k] = entry_of(f, servers.nodes[s].name);
            if (linked && f.linked) (*linked)[i] = true;
          } else if (f.name != out[i][k].name || f.checksum != out[i][k].checksum || f.bytes != out[i][k].bytes) {
            return fail("the replica of {} on node {} differs from the original on node {}", f.name,
                        servers.nodes[s].name, out[i][k].nodes.front());
          } else {
            out[i][k].nodes.push_back(servers.nodes[s].name);
          }
        }
      }
    }
  }
  return out;
}

expected<void> restore_own_table(caf::actor_system& sys, const msg::partition_server_actor& server,
                                 const msg::partition_key& key, std::uint64_t version,
                                 const std::array<const storage::checkpoint_file*, 2>& files, caf::timespan deadline) {
  msg::table_restore job{key, version, {}, {}, {}};
  for (auto* f : files) job.files.push_back({f->name, f->bytes, f->checksum});
  server_peer peer(sys, server, deadline);
  auto ok = peer.ask<bool>(fmt::format("restoring table {} from this checkpoint path", msg::to_string(key)),
                           msg::restore_atom::value, std::move(job));
  if (!ok) return std::unexpected(ok.error());
  return {};
}

expected<void> restore_local_table(caf::actor_system& sys, const local_servers& servers,
                                   const msg::partition_key& key, std::uint64_t version,
                                   const std::array<const storage::checkpoint_file*, 2>& files, std::size_t target,
                                   caf::timespan deadline) {
  // The nodes that hold both files, in the embeddings file's order.
  std::vector<std::string> holders;
  for (auto& n : files[0]->nodes)
    if (std::find(files[1]->nodes.begin(), files[1]->nodes.end(), n) != files[1]->nodes.end()) holders.push_back(n);
  std::vector<std::string> why;
  for (auto& name : holders) {
    auto at = std::find_if(servers.nodes.begin(), servers.nodes.end(), [&](auto& n) { return n.name == name; });
    if (at == servers.nodes.end()) {
      why.push_back(fmt::format("node {} is not a partition server of this cluster", name));
      continue;
    }
    const auto holder = static_cast<std::size_t>(at - servers.nodes.begin());
    // No target: the holder restores into itself.
    msg::table_restore job{key, version, {}, {}, holder == target ? std::string() : servers.nodes[target].bulk};
    if (holder != target) job.target = {caf::actor_cast<caf::actor>(servers.refs[target].actor)};
    for (auto* f : files) job.files.push_back({f->name, f->bytes, f->checksum});
    server_peer peer(sys, servers.refs[holder].actor, deadline);
    auto ok = peer.ask<bool>(fmt::format("node {} restoring table {}", name, msg::to_string(key)),
                             msg::restore_atom::value, std::move(job));
    if (ok) return {};
    if (ok.error().lost_peer && holder == target) return std::unexpected(ok.error());
    why.push_back(ok.error().message);
  }
  return fail("table {} of the checkpoint (files {}, {}) could not be read from any node that holds it ({}): {}",
              msg::to_string(key), files[0]->name, files[1]->name, fmt::join(holders, ", "), fmt::join(why, "; "));
}

std::vector<std::string> prune_local_tables(caf::actor_system& sys, const local_servers& servers,
                                            const std::set<std::string>& keep, caf::timespan deadline) {
  const std::vector<std::string> names(keep.begin(), keep.end());
  std::vector<std::optional<server_peer>> peers(servers.refs.size());
  for (std::size_t s = 0; s < peers.size(); ++s) {
    peers[s].emplace(sys, servers.refs[s].actor, deadline);
    peers[s]->send(msg::prune_atom::value, names);
  }
  std::vector<std::string> out;
  for (std::size_t s = 0; s < peers.size(); ++s)
    if (auto ok = peers[s]->next<bool>(fmt::format("node {} pruning its table files", servers.nodes[s].name)); !ok)
      out.push_back(ok.error().message);
  return out;
}

} // namespace abg::actors
