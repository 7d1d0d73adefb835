#include "actors/node/data_sync.h"

#include <fcntl.h>
#include <unistd.h>
#include <xxhash.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <deque>
#include <filesystem>
#include <map>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "abg/storage/dataset_files.h"
#include "abg/storage/files.h"
#include "abg/version.h"
#include "actors/blocking_peer.h"

namespace abg::actors {

namespace fs = std::filesystem;

namespace {

// Reads in flight per file: the flow control (as for partitions).
constexpr std::size_t reads_in_flight = 4;

// One file from the data server into a temporary file beside its target,
// checked against the listing, then renamed over the target.
expected<void> fetch_file(blocking_peer<msg::data_server_actor>& server, std::uint32_t index,
                          const storage::dataset_file& f, const fs::path& target) {
  const auto what = fmt::format("fetching {} from the coordinator's node", target.string());
  auto tmp = storage::temporary_path_for(target);
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return fail("{}: cannot create {}: {}", what, tmp.string(), std::strerror(errno));
  auto give_up = [&](error e) {
    ::close(fd);
    ::unlink(tmp.c_str());
    return std::unexpected(std::move(e));
  };
  XXH3_state_t* state = XXH3_createState();
  XXH3_64bits_reset(state);
  std::deque<std::uint64_t> asked;
  std::uint64_t next = 0, written = 0;
  auto ask_more = [&] {
    while (asked.size() < reads_in_flight && next < f.bytes) {
      server.send(msg::read_atom::value, index, next);
      asked.push_back(next);
      next += msg::data_chunk_bytes;
    }
  };
  ask_more();
  expected<void> out;
  while (!asked.empty()) {
    auto chunk = server.next<std::vector<char>>(what);
    if (!chunk) {
      out = std::unexpected(chunk.error());
      break;
    }
    const auto want = std::min(msg::data_chunk_bytes, f.bytes - asked.front());
    asked.pop_front();
    if (chunk->size() != want) {
      out = fail("{}: the coordinator's node sent {} bytes where {} were due", what, chunk->size(), want);
      break;
    }
    XXH3_64bits_update(state, chunk->data(), chunk->size());
    std::size_t done = 0;
    while (done < chunk->size()) {
      auto n = ::write(fd, chunk->data() + done, chunk->size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) break;
      done += static_cast<std::size_t>(n);
    }
    if (done < chunk->size()) {
      out = fail("{}: cannot write {}: {}", what, tmp.string(), std::strerror(errno));
      break;
    }
    written += done;
    ask_more();
  }
  const auto sum = XXH3_64bits_digest(state);
  XXH3_freeState(state);
  if (!out) {
    // Answers still on their way are dropped with the peer.
    return give_up(out.error());
  }
  if (written != f.bytes || sum != f.checksum)
    return give_up(error{fmt::format("{}: the bytes received do not match the coordinator's checksum", what)});
  if (::fsync(fd) != 0) return give_up(error{fmt::format("{}: cannot sync {}: {}", what, tmp.string(), std::strerror(errno))});
  ::close(fd);
  std::error_code ec;
  fs::rename(tmp, target, ec);
  if (ec) {
    ::unlink(tmp.c_str());
    return fail("{}: cannot rename {} to {}: {}", what, tmp.string(), target.string(), ec.message());
  }
  return {};
}

} // namespace

expected<data_sync_report> sync_data(caf::actor_system& sys, const msg::data_server_actor& data, const config& cfg,
                                     std::string_view config_toml, bool fetch, const deadlines& limits,
                                     const std::atomic<bool>* stop, const log_fn& log) {
  const auto start = std::chrono::steady_clock::now();
  data_sync_report report;
  blocking_peer server(sys, data, limits.request, stop);
  auto listing = server.ask<msg::data_listing>("listing the coordinator's data", msg::list_atom::value);
  if (!listing) return std::unexpected(listing.error());
  // The same checks as at join, before anything is written.
  if (listing->abg_version != abg_version)
    return fail("this node runs abg {}, the coordinator abg {}; run the same abg on every node", abg_version,
                listing->abg_version);
  if (listing->config_digest != storage::checksum_hex(storage::checksum(config_toml)))
    return fail("this node was started with another training config than the coordinator (digest {} against {}); "
                "start every node with the same config and overrides",
                storage::checksum_hex(storage::checksum(config_toml)), listing->config_digest);
  report.files = listing->files.size();
  std::vector<std::uint32_t> differ;
  for (std::uint32_t i = 0; i < listing->files.size(); ++i) {
    const auto& f = listing->files[i];
    // Never write outside this node's own data folders, whatever a peer says.
    if (f.root > cfg.edge_paths.size() || !storage::valid_dataset_file_name(f.name))
      return fail("the coordinator's node listed a data file '{}' of root {} that this config has no place for", f.name,
                  f.root);
    auto why = storage::dataset_file_difference(cfg, f);
    if (why.empty()) continue;
    if (!fetch)
      return fail("this node's data differs from the coordinator's: {} of {} ({}): {}; copy the coordinator's imported "
                  "data here, or start the node without --no-fetch-data to fetch it at join",
                  f.name, storage::dataset_root_label(f.root), storage::dataset_root(cfg, f.root).string(), why);
    differ.push_back(i);
  }
  if (!differ.empty()) {
    std::map<std::uint32_t, std::size_t> per_root;
    for (auto i : differ) ++per_root[listing->files[i].root];
    for (auto& [root, n] : per_root) {
      std::error_code ec;
      fs::create_directories(storage::dataset_root(cfg, root), ec);
      if (ec)
        return fail("cannot create {} ({}): {}", storage::dataset_root_label(root),
                    storage::dataset_root(cfg, root).string(), ec.message());
    }
    // Not while an import writes into the same entity path.
    auto lock = storage::directory_lock::acquire(storage::dataset_root(cfg, 0), "fetching data from the coordinator");
    if (!lock) return std::unexpected(lock.error());
    for (auto i : differ) {
      const auto& f = listing->files[i];
      if (auto ok = fetch_file(server, i, f, storage::dataset_root(cfg, f.root) / f.name); !ok)
        return std::unexpected(ok.error());
      ++report.fetched;
      report.bytes += f.bytes;
    }
    for (auto& [root, n] : per_root)
      if (auto ok = storage::fsync_directory(storage::dataset_root(cfg, root)); !ok) return std::unexpected(ok.error());
    if (log) {
      std::vector<std::string> parts;
      for (auto& [root, n] : per_root) parts.push_back(fmt::format("{}: {}", storage::dataset_root_label(root), n));
      log(fmt::format("fetched {} of {} data files ({:.1f} MB) from the coordinator's node ({})", report.fetched,
                      report.files, static_cast<double>(report.bytes) / 1e6, fmt::join(parts, ", ")));
    }
  }
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return report;
}

} // namespace abg::actors
