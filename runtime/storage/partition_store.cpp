#include "abg/storage/partition_store.h"

#include <regex>

#include <fmt/format.h>

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
  if (auto ok = p.embeddings_.commit(scratch()); !ok)
    return std::unexpected(ok.error());
  if (auto ok = p.state_.commit(scratch()); !ok)
    return std::unexpected(ok.error());
  const auto id = p.file_id_;
  std::optional<std::uint64_t> replaced;
  {
    std::lock_guard lock(mutex_);
    auto [it, fresh] = tables_.try_emplace(p.key_, entry{p.info_, id});
    if (!fresh) {
      replaced = it->second.file_id;
      it->second = entry{p.info_, id};
    }
  }
  if (replaced) {
    // Open mappings of the old files keep their pages until dropped.
    std::error_code ec;
    fs::remove(file_of(*replaced, true), ec);
    fs::remove(file_of(*replaced, false), ec);
  }
  return {};
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
