#include "abg/storage/partition_store.h"

#include <cerrno>
#include <cstring>
#include <regex>

#include <unistd.h>

#include <fmt/format.h>

#include "abg/storage/files.h"

namespace abg::storage {

namespace fs = std::filesystem;

namespace {

// "p7.emb.abgt", "p7.state.abgt", and their temporaries (".p7.emb.abgt.tmp.PID").
bool store_file(const std::string& name) {
  static const std::regex pattern(R"(\.?p[0-9]+\.(emb|state)\.abgt(\.tmp\.[0-9]+)?)");
  return std::regex_match(name, pattern);
}

tensor_write_options scratch() {
  return {.sync_directory = false, .sync_file = false};
}

} // namespace

fs::path partition_store_dir(const fs::path& checkpoint_path, std::string_view node) {
  return checkpoint_path / "partition-store" / node;
}

expected<std::unique_ptr<partition_store>> partition_store::open(fs::path dir, const dataset_id& dataset) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec)
    return fail("cannot create the partition store {}: {}", dir.string(), ec.message());
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (!store_file(it->path().filename().string()))
      continue;
    if (fs::remove(it->path(), ec); ec)
      return fail("cannot empty the partition store {}: {}: {}", dir.string(), it->path().filename().string(),
                  ec.message());
  }
  if (ec)
    return fail("cannot list the partition store {}: {}", dir.string(), ec.message());
  return std::make_unique<partition_store>(std::move(dir), dataset);
}

fs::path partition_store::file_of(std::uint64_t file_id, bool embeddings) const {
  return dir_ / fmt::format("p{}.{}.abgt", file_id, embeddings ? "emb" : "state");
}

expected<void> partition_store::put::append(std::span<const float> embeddings, std::span<const float> state) {
  const auto width = static_cast<std::uint64_t>(info_.state_width);
  const auto rows = state.size() / width;
  if (state.size() % width != 0 || embeddings.size() != rows * static_cast<std::uint64_t>(info_.dim))
    return fail("a piece of table {} partition {}: {} embedding values and {} optimizer values for rows of dimension "
                "{} with {} optimizer values each",
                key_.first, key_.second, embeddings.size(), state.size(), info_.dim, width);
  if (rows > info_.rows - rows_written_)
    return fail("a piece of table {} partition {}: {} rows past its {}", key_.first, key_.second,
                rows - (info_.rows - rows_written_), info_.rows);
  if (auto ok = embeddings_.append(embeddings); !ok)
    return ok;
  if (auto ok = state_.append(state); !ok)
    return ok;
  rows_written_ += rows;
  return {};
}

expected<partition_store::put> partition_store::begin(const table_key& key, std::uint64_t version,
                                                      std::uint64_t rows, std::int64_t dim, std::int64_t state_width) {
  if (state_width != 1 && state_width != dim)
    return fail("table {} partition {}: {} optimizer values per row for dimension {} (1 or {})", key.first,
                key.second, state_width, dim, dim);
  std::uint64_t id = 0;
  {
    std::lock_guard lock(mutex_);
    id = next_file_++;
  }
  const std::int64_t emb_shape[] = {static_cast<std::int64_t>(rows), dim};
  const auto state_shape = state_width == 1
                             ? std::vector<std::int64_t>{static_cast<std::int64_t>(rows)}
                             : std::vector<std::int64_t>{static_cast<std::int64_t>(rows), state_width};
  auto emb = tensor_file_writer::create(file_of(id, true), dataset_, emb_shape);
  if (!emb)
    return std::unexpected(emb.error());
  auto state = tensor_file_writer::create(file_of(id, false), dataset_, state_shape);
  if (!state)
    return std::unexpected(state.error());
  return put(key, {version, rows, dim, state_width}, id, std::move(*emb), std::move(*state));
}

expected<void> partition_store::install(put p) {
  if (p.rows_written_ != p.info_.rows)
    return fail("table {} partition {}: {} of its {} rows were written", p.key_.first, p.key_.second, p.rows_written_,
                p.info_.rows);
  auto emb_sum = p.embeddings_.commit(scratch());
  if (!emb_sum)
    return std::unexpected(emb_sum.error());
  auto state_sum = p.state_.commit(scratch());
  if (!state_sum)
    return std::unexpected(state_sum.error());
  set_current(p.key_, {p.info_, p.file_id_, {*emb_sum, *state_sum}});
  return {};
}

void partition_store::set_current(const table_key& key, const entry& e) {
  std::optional<std::uint64_t> replaced;
  {
    std::lock_guard lock(mutex_);
    auto [it, fresh] = tables_.try_emplace(key, e);
    if (!fresh) {
      replaced = it->second.file_id;
      it->second = e;
    }
  }
  if (replaced) {
    // Open mappings of the old files keep their pages until dropped.
    std::error_code ec;
    fs::remove(file_of(*replaced, true), ec);
    fs::remove(file_of(*replaced, false), ec);
  }
}

expected<void> partition_store::store(const table_key& key, std::uint64_t version, std::uint64_t rows,
                                      std::int64_t dim, std::span<const float> embeddings,
                                      std::span<const float> state, std::int64_t state_width) {
  auto p = begin(key, version, rows, dim, state_width);
  if (!p)
    return std::unexpected(p.error());
  if (auto ok = p->append(embeddings, state); !ok)
    return ok;
  return install(std::move(*p));
}

expected<mapped_table> partition_store::read(const table_key& key) const {
  entry e;
  {
    std::lock_guard lock(mutex_);
    auto it = tables_.find(key);
    if (it == tables_.end())
      return fail("the partition store {} has no table {} partition {}", dir_.string(), key.first, key.second);
    e = it->second;
  }
  auto emb = map_tensor_file(file_of(e.file_id, true), dataset_);
  if (!emb)
    return std::unexpected(emb.error());
  auto state = map_tensor_file(file_of(e.file_id, false), dataset_);
  if (!state)
    return std::unexpected(state.error());
  const std::vector<std::int64_t> emb_shape{static_cast<std::int64_t>(e.info.rows), e.info.dim};
  const auto state_shape = e.info.state_width == 1
                             ? std::vector<std::int64_t>{static_cast<std::int64_t>(e.info.rows)}
                             : std::vector<std::int64_t>{static_cast<std::int64_t>(e.info.rows), e.info.state_width};
  if (emb->shape != emb_shape || state->shape != state_shape)
    return fail("the partition store's files of table {} partition {} ({}) do not have its shape", key.first,
                key.second, file_of(e.file_id, true).string());
  return mapped_table{e.info, std::move(*emb), std::move(*state)};
}

namespace {

bool no_links_here(int err) {
  return err == EXDEV || err == EPERM || err == EOPNOTSUPP || err == EMLINK;
}

// Makes the temporary link `tmp` durable and names it `to`, replacing a file
// of that name whole; its size.
expected<std::uint64_t> publish_link(const fs::path& tmp, const fs::path& to) {
  // The store wrote it without syncing: a checkpoint's file must be durable.
  if (auto ok = fsync_file(tmp); !ok) {
    ::unlink(tmp.c_str());
    return std::unexpected(ok.error());
  }
  if (::rename(tmp.c_str(), to.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    return fail("cannot rename {} to {}: {}", tmp.string(), to.string(), std::strerror(err));
  }
  std::error_code ec;
  const auto bytes = fs::file_size(to, ec);
  if (ec)
    return fail("cannot read the size of {}: {}", to.string(), ec.message());
  return bytes;
}

} // namespace

expected<std::optional<std::array<linked_file, 2>>> partition_store::link_into(const table_key& key,
                                                                               std::uint64_t version,
                                                                               const fs::path& embeddings,
                                                                               const fs::path& state) const {
  const std::array<fs::path, 2> to{embeddings, state}, tmp{temporary_path_for(embeddings), temporary_path_for(state)};
  std::array<std::uint64_t, 2> checksums{};
  {
    // Only the links under the lock: a put installed meanwhile removes the
    // store's names of this version after them, and the links keep the
    // files. The syncs, which may take long, come after.
    std::lock_guard lock(mutex_);
    auto it = tables_.find(key);
    if (it == tables_.end())
      return fail("the partition store {} has no table {} partition {}", dir_.string(), key.first, key.second);
    if (it->second.info.version != version)
      return fail("table {} partition {} is at version {} in the partition store, not {}", key.first, key.second,
                  it->second.info.version, version);
    checksums = it->second.checksums;
    for (int k = 0; k < 2; ++k) {
      const auto from = file_of(it->second.file_id, k == 0);
      ::unlink(tmp[k].c_str());
      if (::link(from.c_str(), tmp[k].c_str()) != 0) {
        const int err = errno;
        if (k == 1)
          ::unlink(tmp[0].c_str());
        if (no_links_here(err))
          return std::nullopt;
        return fail("cannot link {} as {}: {}", from.string(), tmp[k].string(), std::strerror(err));
      }
    }
  }
  std::array<linked_file, 2> out;
  for (int k = 0; k < 2; ++k) {
    auto bytes = publish_link(tmp[k], to[k]);
    if (!bytes) {
      if (k == 0)
        ::unlink(tmp[1].c_str());
      return std::unexpected(bytes.error());
    }
    out[k] = {*bytes, checksums[k]};
  }
  for (const auto& dir : {embeddings.parent_path(), state.parent_path()})
    if (auto ok = fsync_directory(dir); !ok)
      return std::unexpected(ok.error());
  return out;
}

expected<bool> partition_store::adopt(const table_key& key, std::uint64_t version, const fs::path& embeddings,
                                     const fs::path& state, std::array<std::uint64_t, 2> checksums) {
  auto emb = map_tensor_file(embeddings, dataset_);
  if (!emb)
    return std::unexpected(emb.error());
  auto st = map_tensor_file(state, dataset_);
  if (!st)
    return std::unexpected(st.error());
  for (auto* m : {&*emb, &*st})
    if (m->payload_checksum != checksums[m == &*emb ? 0 : 1])
      return fail("{}: checksum differs from the checkpoint manifest's: file is corrupt or from another version",
                  (m == &*emb ? embeddings : state).string());
  const auto& es = emb->shape;
  const auto& ss = st->shape;
  if (es.size() != 2 || ss.empty() || ss.size() > 2 || ss[0] != es[0] || (ss.size() == 2 && ss[1] != es[1]))
    return fail("{} and {} do not hold one table", embeddings.string(), state.string());
  std::uint64_t id = 0;
  {
    std::lock_guard lock(mutex_);
    id = next_file_++;
  }
  for (int k = 0; k < 2; ++k) {
    const auto to = file_of(id, k == 0);
    if (::link((k == 0 ? embeddings : state).c_str(), to.c_str()) != 0) {
      const int err = errno;
      std::error_code ec;
      fs::remove(file_of(id, true), ec);
      if (no_links_here(err))
        return false;
      return fail("cannot link {} into the partition store as {}: {}", (k == 0 ? embeddings : state).string(),
                  to.string(), std::strerror(err));
    }
  }
  set_current(key, {{version, static_cast<std::uint64_t>(es[0]), es[1], ss.size() == 2 ? ss[1] : 1}, id, checksums});
  return true;
}

std::optional<stored_table> partition_store::find(const table_key& key) const {
  std::lock_guard lock(mutex_);
  auto it = tables_.find(key);
  if (it == tables_.end())
    return std::nullopt;
  return it->second.info;
}

std::map<table_key, stored_table> partition_store::list() const {
  std::lock_guard lock(mutex_);
  std::map<table_key, stored_table> out;
  for (const auto& [k, e] : tables_)
    out.emplace(k, e.info);
  return out;
}

void partition_store::clear() {
  std::map<table_key, entry> gone;
  {
    std::lock_guard lock(mutex_);
    gone.swap(tables_);
  }
  std::error_code ec;
  for (const auto& [k, e] : gone) {
    fs::remove(file_of(e.file_id, true), ec);
    fs::remove(file_of(e.file_id, false), ec);
  }
}

} // namespace abg::storage
