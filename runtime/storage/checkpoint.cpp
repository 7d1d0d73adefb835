#include "abg/storage/checkpoint.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <map>
#include <set>

#include <spdlog/spdlog.h>

namespace abg::storage {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

constexpr std::string_view manifest_name = "manifest.json";
constexpr std::string_view shared_file_name = "shared.abgt";
constexpr std::string_view config_file_name = "config.toml";
constexpr std::string_view tables_prefix = "tables/";

} // namespace

// Entity type names come from the config and may hold any character. The
// manifest maps tables to files, so readers never rebuild a name.
std::string file_safe_name(std::string_view name) {
  std::string out;
  for (unsigned char c : name) {
    bool keep = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
                c == '-' || c == '.';
    if (keep)
      out += static_cast<char>(c);
    else
      out += fmt::format("%{:02X}", c);
  }
  return out;
}

namespace {

// The manifest's own checksum covers its canonical (compact, key-sorted) dump.
std::string canonical(const json& doc) {
  return doc.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::optional<std::int64_t> parse_int(std::string_view text) {
  std::int64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc{} || end != text.data() + text.size() || text.empty())
    return std::nullopt;
  return value;
}

std::optional<std::uint64_t> parse_checksum(std::string_view hex) {
  std::uint64_t value = 0;
  auto [end, ec] = std::from_chars(hex.data(), hex.data() + hex.size(), value, 16);
  if (hex.size() != 16 || ec != std::errc{} || end != hex.data() + hex.size())
    return std::nullopt;
  return value;
}

// "v12" -> 12; anything else (temporaries, "latest", files) -> nullopt.
std::optional<std::int64_t> version_of_dir_name(const std::string& name) {
  if (name.size() < 2 || name[0] != 'v')
    return std::nullopt;
  auto digits = std::string_view(name).substr(1);
  if (!std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return std::nullopt;
  return parse_int(digits);
}

bool plain_file_name(std::string_view name) {
  return !name.empty() && name[0] != '.' && name.find('/') == std::string_view::npos;
}

// A manifest's file name: plain (in the version directory) or, from format 2
// on, "tables/" + plain (in the checkpoint path's tables folder).
bool listed_file_name(std::string_view name, std::uint32_t format_version) {
  if (format_version >= 2 && name.starts_with(tables_prefix))
    return plain_file_name(name.substr(tables_prefix.size()));
  return plain_file_name(name);
}

json to_json(const checkpoint_position& p) {
  json out = {{"epoch", p.epoch}, {"edge_path", p.edge_path}, {"edge_chunk", p.edge_chunk},
              {"epoch_complete", p.epoch_complete}};
  if (p.mid_iteration()) out["buckets_done"] = p.buckets_done;
  return out;
}

json to_json(const checkpoint_manifest& m) {
  json tables = json::array();
  for (auto& t : m.tables)
    tables.push_back({{"type", t.type},
                      {"partition", t.partition},
                      {"rows", t.rows},
                      {"dim", t.dim},
                      {"embeddings", t.embeddings_file},
                      {"optimizer", t.optimizer_file.empty() ? json(nullptr) : json(t.optimizer_file)},
                      {"state_width", t.state_width}});
  json shared = json::array();
  for (auto& e : m.shared)
    shared.push_back({{"name", e.name}, {"shape", e.shape}, {"offset", e.offset}, {"size", e.size}});
  json files = json::array();
  for (auto& f : m.files) {
    json entry{{"name", f.name}, {"bytes", f.bytes}, {"checksum", checksum_hex(f.checksum)}};
    if (!f.nodes.empty())
      entry["nodes"] = f.nodes;
    files.push_back(std::move(entry));
  }
  return {{"format", "abg-checkpoint"},
          {"format_version", checkpoint_format_version},
          {"dataset_id", m.dataset.hex()},
          {"version", m.version},
          {"position", to_json(m.position)},
          {"preserved", m.preserved},
          {"schema", m.schema},
          {"tables", std::move(tables)},
          {"shared", std::move(shared)},
          {"files", std::move(files)},
          {"stats", m.stats}};
}

std::string manifest_text(const checkpoint_manifest& m) {
  auto doc = to_json(m);
  doc["manifest_checksum"] = checksum_hex(checksum(canonical(doc)));
  return doc.dump(2, ' ', false, json::error_handler_t::replace) + "\n";
}

// Returns the first non-finite value's position, or nullopt.
std::optional<std::size_t> first_non_finite(std::span<const float> values) {
  for (std::size_t i = 0; i < values.size(); ++i)
    if (!std::isfinite(values[i]))
      return i;
  return std::nullopt;
}

std::string shape_text(std::span<const std::int64_t> shape) {
  return fmt::format("[{}]", fmt::join(shape, ", "));
}

} // namespace

// --- names ------------------------------------------------------------------------

std::string global_embedding_name(std::string_view type) {
  return fmt::format("global_emb.{}", type);
}

std::string relation_param_name(std::int64_t relation, std::string_view side, std::string_view param) {
  return fmt::format("relations.{}.{}.{}", relation, side, param);
}

std::string optimizer_state_name(std::string_view shared_name) {
  return fmt::format("optim.{}", shared_name);
}

std::optional<relation_param_key> parse_relation_param_name(std::string_view name) {
  constexpr std::string_view prefix = "relations.";
  if (!name.starts_with(prefix))
    return std::nullopt;
  name.remove_prefix(prefix.size());
  auto dot = name.find('.');
  if (dot == std::string_view::npos)
    return std::nullopt;
  auto relation = parse_int(name.substr(0, dot));
  name.remove_prefix(dot + 1);
  dot = name.find('.');
  if (!relation || *relation < 0 || dot == std::string_view::npos || dot + 1 == name.size())
    return std::nullopt;
  auto side = name.substr(0, dot);
  if (side != "lhs" && side != "rhs")
    return std::nullopt;
  return relation_param_key{*relation, std::string(side), std::string(name.substr(dot + 1))};
}

// --- shared_tensors -----------------------------------------------------------------

expected<void> shared_tensors::add(std::string_view name, std::vector<std::int64_t> shape,
                                   std::span<const float> values) {
  if (name.empty())
    return fail("a shared tensor needs a name");
  if (find(name))
    return fail("shared tensor '{}' was given twice", name);
  if (std::any_of(shape.begin(), shape.end(), [](auto d) { return d < 0; }) ||
      static_cast<std::uint64_t>(element_count(shape)) != values.size())
    return fail("shared tensor '{}': shape {} does not hold {} values", name, shape_text(shape), values.size());
  entries.push_back({std::string(name), std::move(shape), data.size(), values.size()});
  data.insert(data.end(), values.begin(), values.end());
  return {};
}

const shared_tensors::entry* shared_tensors::find(std::string_view name) const {
  auto i = std::find_if(entries.begin(), entries.end(), [&](auto& e) { return e.name == name; });
  return i == entries.end() ? nullptr : &*i;
}

// --- schema and settings ----------------------------------------------------------------

json checkpoint_schema(const config& c) {
  json entities = json::array();
  for (auto& [name, e] : c.entities)
    entities.push_back({{"name", name},
                        {"num_partitions", e.num_partitions},
                        {"dimension", e.dimension.value_or(c.dimension)},
                        {"featurized", e.featurized}});
  json relations = json::array();
  for (auto& r : c.relations)
    relations.push_back({{"name", r.name}, {"lhs", r.lhs}, {"rhs", r.rhs}, {"operator", r.operator_}});
  return {{"entities", std::move(entities)},
          {"relations", std::move(relations)},
          {"dynamic_relations", c.dynamic_relations}};
}

checkpoint_settings checkpoint_settings::from(const config& c, const dataset_id& dataset, std::string config_toml) {
  return {dataset, checkpoint_schema(c), std::move(config_toml), c.checkpoint_keep_versions,
          c.checkpoint_preservation_interval};
}

// --- manifest -------------------------------------------------------------------------

const checkpoint_table* checkpoint_manifest::table(std::string_view type, std::int64_t partition) const {
  auto i = std::find_if(tables.begin(), tables.end(),
                        [&](auto& t) { return t.type == type && t.partition == partition; });
  return i == tables.end() ? nullptr : &*i;
}

const checkpoint_file* checkpoint_manifest::file(std::string_view name) const {
  auto i = std::find_if(files.begin(), files.end(), [&](auto& f) { return f.name == name; });
  return i == files.end() ? nullptr : &*i;
}

fs::path checkpoint_version_dir(const fs::path& checkpoint_path, std::int64_t version) {
  return checkpoint_path / fmt::format("v{}", version);
}

fs::path checkpoint_tables_dir(const fs::path& checkpoint_path) {
  return checkpoint_path / tables_prefix.substr(0, tables_prefix.size() - 1);
}

std::string checkpoint_table_file(std::string_view kind, std::string_view type, std::int64_t partition,
                                  std::int64_t version) {
  return fmt::format("{}{}_{}_{}.v{}.abgt", tables_prefix, kind, file_safe_name(type), partition, version);
}

expected<std::set<std::string>> listed_table_files(const fs::path& checkpoint_path) {
  std::set<std::string> listed;
  for (auto v : committed_checkpoint_versions(checkpoint_path)) {
    auto m = read_checkpoint_manifest(checkpoint_version_dir(checkpoint_path, v));
    if (!m)
      return std::unexpected(m.error());
    for (auto& f : m->files)
      if (f.name.starts_with(tables_prefix))
        listed.insert(f.name);
  }
  return listed;
}

void prune_table_files(const fs::path& checkpoint_path, const std::set<std::string>& keep) {
  std::error_code ec;
  for (auto& entry : fs::directory_iterator(checkpoint_tables_dir(checkpoint_path), ec)) {
    std::error_code ignored;
    if (!keep.contains(std::string(tables_prefix) + entry.path().filename().string()))
      fs::remove(entry.path(), ignored);
  }
}

std::vector<std::int64_t> committed_checkpoint_versions(const fs::path& checkpoint_path) {
  std::vector<std::int64_t> out;
  std::error_code ec;
  for (auto& entry : fs::directory_iterator(checkpoint_path, ec)) {
    auto v = version_of_dir_name(entry.path().filename().string());
    if (v && fs::exists(entry.path() / manifest_name, ec))
      out.push_back(*v);
  }
  std::sort(out.begin(), out.end());
  return out;
}

expected<checkpoint_manifest> read_checkpoint_manifest(const fs::path& version_dir) {
  auto file = version_dir / manifest_name;
  auto text = read_file(file);
  if (!text)
    return std::unexpected(text.error());
  auto bad = [&](std::string_view what) { return fail("{}: {}: the manifest is corrupt", file.string(), what); };
  auto doc = json::parse(*text, nullptr, false);
  if (doc.is_discarded() || !doc.is_object())
    return bad("not valid JSON");
  try {
    if (doc.value("format", "") != "abg-checkpoint")
      return bad("not an abg checkpoint manifest");
    auto format_version = doc.at("format_version").get<std::uint32_t>();
    if (format_version < 1 || format_version > checkpoint_format_version)
      return fail("{}: format version {} is not supported (this abg reads versions 1 to {}); use a newer abg",
                  file.string(), format_version, checkpoint_format_version);
    auto recorded = parse_checksum(doc.at("manifest_checksum").get<std::string>());
    doc.erase("manifest_checksum");
    if (!recorded || *recorded != checksum(canonical(doc)))
      return fail("{}: checksum mismatch: file is corrupt", file.string());

    checkpoint_manifest m;
    m.version = doc.at("version").get<std::int64_t>();
    auto dir_version = version_of_dir_name(version_dir.filename().string());
    if (dir_version && *dir_version != m.version)
      return bad(fmt::format("it names version {} but lies in {}", m.version, version_dir.filename().string()));
    auto id = dataset_id::parse(doc.at("dataset_id").get<std::string>());
    if (!id)
      return bad(id.error().message);
    m.dataset = *id;
    auto& p = doc.at("position");
    m.position = {p.at("epoch").get<std::int64_t>(), p.at("edge_path").get<std::int64_t>(),
                  p.at("edge_chunk").get<std::int64_t>(), p.at("epoch_complete").get<bool>(),
                  p.value("buckets_done", std::vector<std::array<std::int32_t, 2>>{})};
    if (m.position.mid_iteration() && m.position.epoch_complete)
      return bad("its position ends an epoch and lists the buckets done of an unfinished iteration");
    m.preserved = doc.at("preserved").get<bool>();
    m.schema = doc.at("schema");
    m.stats = doc.at("stats");
    for (auto& f : doc.at("files")) {
      auto sum = parse_checksum(f.at("checksum").get<std::string>());
      checkpoint_file entry{f.at("name").get<std::string>(), f.at("bytes").get<std::uint64_t>(), sum.value_or(0),
                            f.value("nodes", std::vector<std::string>{})};
      const bool remote_ok = entry.nodes.empty() || (format_version >= 2 && entry.name.starts_with(tables_prefix));
      if (!sum || !listed_file_name(entry.name, format_version) || m.file(entry.name) || !remote_ok)
        return bad(fmt::format("bad file entry '{}'", entry.name));
      m.files.push_back(std::move(entry));
    }
    auto listed = [&](const std::string& name) { return m.file(name) != nullptr; };
    for (auto& t : doc.at("tables")) {
      checkpoint_table table{t.at("type").get<std::string>(), t.at("partition").get<std::int64_t>(),
                             t.at("rows").get<std::int64_t>(), t.at("dim").get<std::int64_t>(),
                             t.at("embeddings").get<std::string>(),
                             t.at("optimizer").is_null() ? "" : t.at("optimizer").get<std::string>(),
                             t.value("state_width", std::int64_t{1})};
      if (table.rows < 0 || table.dim <= 0 || (table.state_width != 1 && table.state_width != table.dim) ||
          !listed(table.embeddings_file) ||
          (!table.optimizer_file.empty() && !listed(table.optimizer_file)))
        return bad(fmt::format("bad table entry for '{}' partition {}", table.type, table.partition));
      m.tables.push_back(std::move(table));
    }
    std::uint64_t offset = 0;
    for (auto& e : doc.at("shared")) {
      shared_tensors::entry entry{e.at("name").get<std::string>(), e.at("shape").get<std::vector<std::int64_t>>(),
                                  e.at("offset").get<std::uint64_t>(), e.at("size").get<std::uint64_t>()};
      if (entry.offset != offset || std::any_of(entry.shape.begin(), entry.shape.end(), [](auto d) { return d < 0; }) ||
          static_cast<std::uint64_t>(element_count(entry.shape)) != entry.size)
        return bad(fmt::format("bad shared tensor entry '{}'", entry.name));
      offset += entry.size;
      m.shared.push_back(std::move(entry));
    }
    if (!listed(std::string(shared_file_name)) || !listed(std::string(config_file_name)))
      return bad("shared.abgt or config.toml is not listed");
    return m;
  } catch (const json::exception& e) {
    return bad(e.what());
  }
}

// --- writer ---------------------------------------------------------------------------

expected<checkpoint_writer> checkpoint_writer::begin(fs::path checkpoint_path, std::int64_t version,
                                                     checkpoint_settings settings) {
  if (version < 1)
    return fail("checkpoint versions start at 1, got {}", version);
  if (settings.keep_versions < 1)
    return fail("checkpoint_keep_versions must be at least 1, got {}", settings.keep_versions);
  checkpoint_writer w;
  w.dir_ = checkpoint_version_dir(checkpoint_path, version);
  std::error_code ec;
  if (fs::exists(w.dir_ / manifest_name, ec))
    return fail("checkpoint version {} is already committed in {}; resume from it or use a new checkpoint_path",
                version, w.dir_.string());
  fs::remove_all(w.dir_, ec); // an uncommitted leftover of a crashed writer
  if (ec)
    return fail("cannot remove the uncommitted leftover {}: {}", w.dir_.string(), ec.message());
  fs::create_directories(w.dir_, ec);
  if (!ec)
    fs::create_directories(checkpoint_tables_dir(checkpoint_path), ec);
  if (ec)
    return fail("cannot create checkpoint directory {}: {}", w.dir_.string(), ec.message());
  w.root_ = std::move(checkpoint_path);
  w.manifest_.version = version;
  w.manifest_.dataset = settings.dataset;
  w.manifest_.schema = settings.schema;
  w.settings_ = std::move(settings);
  return w;
}

expected<void> checkpoint_writer::usable() const {
  if (committed_)
    return fail("checkpoint version {} is already committed", manifest_.version);
  return {};
}

expected<void> checkpoint_writer::refuse_non_finite(std::string_view what, std::span<const float> values,
                                                    std::int64_t dim, std::uint64_t offset) {
  auto found = first_non_finite(values);
  if (!found)
    return {};
  const auto at = offset + *found;
  auto where = dim > 0 ? fmt::format("row {}, column {}", at / static_cast<std::uint64_t>(dim),
                                     at % static_cast<std::uint64_t>(dim))
                       : fmt::format("element {}", at);
  poisoned_ = fmt::format("{} holds {} at {} (training diverged; try a lower lr)", what, values[*found], where);
  return fail("refusing to checkpoint version {}: {}", manifest_.version, poisoned_);
}

expected<void> checkpoint_writer::put_embeddings(std::string_view type, std::int64_t partition,
                                                 std::span<const float> data, std::int64_t rows, std::int64_t dim) {
  if (auto ok = usable(); !ok)
    return ok;
  if (rows < 0 || dim <= 0 || static_cast<std::uint64_t>(rows * dim) != data.size())
    return fail("embeddings of '{}' partition {}: {} values do not form [{}, {}]", type, partition, data.size(),
                rows, dim);
  if (manifest_.table(type, partition))
    return fail("embeddings of '{}' partition {} were given twice", type, partition);
  auto what = fmt::format("embeddings of entity type '{}' partition {}", type, partition);
  if (auto ok = refuse_non_finite(what, data, dim); !ok)
    return ok;
  std::int64_t shape[] = {rows, dim};
  auto name = put_table_file("embeddings", type, partition, shape, data);
  if (!name)
    return std::unexpected(name.error());
  manifest_.tables.push_back({std::string(type), partition, rows, dim, *name, ""});
  return {};
}

expected<std::string> checkpoint_writer::put_table_file(std::string_view kind, std::string_view type,
                                                        std::int64_t partition, std::span<const std::int64_t> shape,
                                                        std::span<const float> values) {
  auto name = checkpoint_table_file(kind, type, partition, manifest_.version);
  auto sum = write_tensor_file(root_ / name, manifest_.dataset, shape, values, {.sync_directory = false});
  if (!sum)
    return std::unexpected(sum.error());
  manifest_.files.push_back({name, tensor_header_size + values.size_bytes(), *sum});
  return name;
}

expected<bool> checkpoint_writer::keep_table(const checkpoint_manifest& previous, std::string_view type,
                                             std::int64_t partition) {
  if (auto ok = usable(); !ok)
    return std::unexpected(ok.error());
  if (manifest_.table(type, partition))
    return fail("the table of '{}' partition {} was given twice", type, partition);
  auto* t = previous.table(type, partition);
  if (previous.dataset != manifest_.dataset || previous.version >= manifest_.version || t == nullptr)
    return false;
  std::vector<const checkpoint_file*> files;
  for (auto* name : {&t->embeddings_file, &t->optimizer_file}) {
    if (name->empty())
      continue;
    auto* f = previous.file(*name);
    if (f == nullptr || !f->name.starts_with(tables_prefix))
      return false;
    // Files on other nodes are theirs to keep (prune_table_files there).
    std::error_code ec;
    if (f->nodes.empty() && (fs::file_size(root_ / f->name, ec) != f->bytes || ec))
      return false;
    files.push_back(f);
  }
  for (auto* f : files)
    manifest_.files.push_back(*f);
  manifest_.tables.push_back(*t);
  return true;
}

expected<void> checkpoint_writer::put_optimizer(std::string_view type, std::int64_t partition,
                                                std::span<const float> state) {
  if (auto ok = usable(); !ok)
    return ok;
  auto it = std::find_if(manifest_.tables.begin(), manifest_.tables.end(),
                         [&](auto& t) { return t.type == type && t.partition == partition; });
  if (it == manifest_.tables.end())
    return fail("optimizer state of '{}' partition {}: put its embeddings first", type, partition);
  if (!it->optimizer_file.empty())
    return fail("optimizer state of '{}' partition {} was given twice", type, partition);
  const auto rows = static_cast<std::uint64_t>(it->rows);
  const bool elementwise = state.size() != rows && state.size() == rows * static_cast<std::uint64_t>(it->dim);
  if (state.size() != rows && !elementwise)
    return fail("optimizer state of '{}' partition {} has {} values for {} rows of dimension {} (expected one or {} "
                "per row)",
                type, partition, state.size(), it->rows, it->dim, it->dim);
  auto what = fmt::format("optimizer state of entity type '{}' partition {}", type, partition);
  if (auto ok = refuse_non_finite(what, state, 0); !ok)
    return ok;
  const auto shape = elementwise ? std::vector<std::int64_t>{it->rows, it->dim} : std::vector<std::int64_t>{it->rows};
  auto name = put_table_file("optimizer", type, partition, shape, state);
  if (!name)
    return std::unexpected(name.error());
  it->optimizer_file = *name;
  it->state_width = elementwise ? it->dim : 1;
  return {};
}

expected<void> checkpoint_writer::put_server_table(const checkpoint_table& table, const checkpoint_file& embeddings,
                                                   const checkpoint_file& optimizer) {
  if (auto ok = usable(); !ok)
    return ok;
  if (manifest_.table(table.type, table.partition))
    return fail("the table of '{}' partition {} was given twice", table.type, table.partition);
  for (auto* f : {&embeddings, &optimizer})
    if (!f->name.starts_with(tables_prefix) || manifest_.file(f->name))
      return fail("table file {} of '{}' partition {}: a partition server's table file needs a new tables/ name",
                  f->name, table.type, table.partition);
  auto t = table;
  t.embeddings_file = embeddings.name;
  t.optimizer_file = optimizer.name;
  manifest_.files.push_back(embeddings);
  manifest_.files.push_back(optimizer);
  manifest_.tables.push_back(std::move(t));
  return {};
}

expected<checkpoint_writer::table_stream> checkpoint_writer::begin_table(std::string_view type,
                                                                         std::int64_t partition, std::int64_t rows,
                                                                         std::int64_t dim, std::int64_t state_width) {
  if (auto ok = usable(); !ok)
    return std::unexpected(ok.error());
  if (rows < 0 || dim <= 0 || (state_width != 1 && state_width != dim))
    return fail("table of '{}' partition {}: {} rows of dimension {} with {} optimizer values per row do not form a "
                "table (1 or the dimension per row)",
                type, partition, rows, dim, state_width);
  if (manifest_.table(type, partition))
    return fail("the table of '{}' partition {} was given twice", type, partition);
  checkpoint_table t{std::string(type), partition, rows, dim,
                     checkpoint_table_file("embeddings", type, partition, manifest_.version),
                     checkpoint_table_file("optimizer", type, partition, manifest_.version), state_width};
  const std::int64_t emb_shape[] = {rows, dim};
  auto emb = tensor_file_writer::create(root_ / t.embeddings_file, manifest_.dataset, emb_shape);
  if (!emb)
    return std::unexpected(emb.error());
  const auto state_shape = state_width == 1 ? std::vector<std::int64_t>{rows} : std::vector<std::int64_t>{rows, dim};
  auto state = tensor_file_writer::create(root_ / t.optimizer_file, manifest_.dataset, state_shape);
  if (!state)
    return std::unexpected(state.error());
  return table_stream(std::move(t), std::move(*emb), std::move(*state));
}

expected<void> checkpoint_writer::append_table(table_stream& t, std::span<const float> values) {
  if (auto ok = usable(); !ok)
    return ok;
  const auto emb_total = static_cast<std::uint64_t>(t.table_.rows * t.table_.dim);
  while (!values.empty()) {
    const bool emb = t.written_ < emb_total;
    const auto at = emb ? t.written_ : t.written_ - emb_total;
    const auto room = emb ? emb_total - at : static_cast<std::uint64_t>(t.table_.rows * t.table_.state_width) - at;
    const auto piece = values.first(std::min<std::uint64_t>(room, values.size()));
    if (piece.empty())
      return fail("table of '{}' partition {}: {} values more than its embeddings and optimizer state hold",
                  t.table_.type, t.table_.partition, values.size());
    auto what = fmt::format("{} of entity type '{}' partition {}", emb ? "embeddings" : "optimizer state",
                            t.table_.type, t.table_.partition);
    if (auto ok = refuse_non_finite(what, piece, emb || t.table_.state_width != 1 ? t.table_.dim : 0, at); !ok)
      return ok;
    if (auto ok = (emb ? t.embeddings_ : t.state_).append(piece); !ok)
      return ok;
    t.written_ += piece.size();
    values = values.subspan(piece.size());
  }
  return {};
}

expected<void> checkpoint_writer::put_table(table_stream t) {
  if (auto ok = usable(); !ok)
    return ok;
  if (manifest_.table(t.table_.type, t.table_.partition))
    return fail("the table of '{}' partition {} was given twice", t.table_.type, t.table_.partition);
  const auto emb_values = static_cast<std::uint64_t>(t.table_.rows * t.table_.dim);
  const auto state_values = static_cast<std::uint64_t>(t.table_.rows * t.table_.state_width);
  if (t.written_ != emb_values + state_values)
    return fail("table of '{}' partition {}: {} of its {} values were given", t.table_.type, t.table_.partition,
                t.written_, emb_values + state_values);
  auto emb_sum = t.embeddings_.commit({.sync_directory = false});
  if (!emb_sum)
    return std::unexpected(emb_sum.error());
  auto state_sum = t.state_.commit({.sync_directory = false});
  if (!state_sum)
    return std::unexpected(state_sum.error());
  manifest_.files.push_back({t.table_.embeddings_file, tensor_header_size + emb_values * sizeof(float), *emb_sum});
  manifest_.files.push_back({t.table_.optimizer_file, tensor_header_size + state_values * sizeof(float), *state_sum});
  manifest_.tables.push_back(std::move(t.table_));
  return {};
}

expected<void> checkpoint_writer::put_shared(std::string_view name, std::vector<std::int64_t> shape,
                                             std::span<const float> values) {
  if (auto ok = usable(); !ok)
    return ok;
  if (auto ok = refuse_non_finite(fmt::format("shared tensor '{}'", name), values, 0); !ok)
    return ok;
  return shared_.add(name, std::move(shape), values);
}

namespace {

// Keeps the newest `keep` committed versions up to `current` and the preserved
// ones; removes the rest and uncommitted leftovers older than `current`.
void prune(const fs::path& root, std::int64_t current, std::int64_t keep) {
  auto committed = committed_checkpoint_versions(root);
  std::int64_t kept = 0;
  std::error_code ec;
  for (auto v = committed.rbegin(); v != committed.rend(); ++v) {
    if (*v > current)
      continue; // not ours to judge
    auto dir = checkpoint_version_dir(root, *v);
    if (kept < keep) {
      ++kept;
      continue;
    }
    if (auto m = read_checkpoint_manifest(dir); m && m->preserved)
      continue;
    // Removing the manifest first uncommits the version at once.
    fs::remove(dir / manifest_name, ec);
    if (!ec)
      fs::remove_all(dir, ec);
    if (ec)
      spdlog::warn("cannot remove old checkpoint {}: {}", dir.string(), ec.message());
  }
  for (auto& entry : fs::directory_iterator(root, ec)) {
    auto v = version_of_dir_name(entry.path().filename().string());
    std::error_code ignored;
    if (v && *v < current && !fs::exists(entry.path() / manifest_name, ignored))
      fs::remove_all(entry.path(), ignored);
  }
  // Table files no committed version refers to any more: those of pruned
  // versions, and leftovers of crashed writers. Nothing is removed while a
  // manifest cannot be read (it might refer to anything).
  auto listed = listed_table_files(root);
  if (!listed) {
    spdlog::warn("keeping every table file of {}: {}", root.string(), listed.error().message);
    return;
  }
  prune_table_files(root, *listed);
}

} // namespace

expected<checkpoint_manifest> checkpoint_writer::commit(const checkpoint_position& position, json stats) {
  if (auto ok = usable(); !ok)
    return std::unexpected(ok.error());
  if (!poisoned_.empty())
    return fail("refusing to commit checkpoint version {}: {}", manifest_.version, poisoned_);
  auto v = manifest_.version;
  auto dir_error = [&](const error& e) {
    return fail("checkpoint version {} was not committed: {}", v, e.message);
  };

  std::int64_t shared_shape[] = {static_cast<std::int64_t>(shared_.data.size())};
  auto sum = write_tensor_file(dir_ / shared_file_name, manifest_.dataset, shared_shape, shared_.data,
                               {.sync_directory = false});
  if (!sum)
    return dir_error(sum.error());
  manifest_.files.push_back({std::string(shared_file_name), tensor_header_size + shared_.data.size() * 4, *sum});
  manifest_.shared = shared_.entries;

  auto config_out = atomic_file_writer::create(dir_ / config_file_name);
  if (!config_out)
    return dir_error(config_out.error());
  if (auto ok = config_out->write(settings_.config_toml); !ok)
    return dir_error(ok.error());
  if (auto ok = config_out->commit(false); !ok)
    return dir_error(ok.error());
  manifest_.files.push_back(
    {std::string(config_file_name), settings_.config_toml.size(), checksum(settings_.config_toml)});

  // Every file and both directory entries durable before the commit point.
  if (auto ok = fsync_directory(dir_); !ok)
    return dir_error(ok.error());
  if (auto ok = fsync_directory(checkpoint_tables_dir(root_)); !ok)
    return dir_error(ok.error());
  if (auto ok = fsync_directory(root_); !ok)
    return dir_error(ok.error());

  manifest_.position = position;
  auto interval = settings_.preservation_interval;
  manifest_.preserved = position.epoch_complete && interval && *interval > 0 && (position.epoch + 1) % *interval == 0;
  manifest_.stats = std::move(stats);
  if (auto ok = write_file_atomic(dir_ / manifest_name, manifest_text(manifest_)); !ok)
    return dir_error(ok.error());
  committed_ = true;
  prune(root_, v, settings_.keep_versions);
  return manifest_;
}

// --- reader ---------------------------------------------------------------------------

expected<checkpoint_reader> checkpoint_reader::open(fs::path checkpoint_path, const dataset_id& expected_dataset,
                                                    std::optional<std::int64_t> version) {
  checkpoint_reader r;
  std::error_code ec;
  if (version) {
    r.dir_ = checkpoint_version_dir(checkpoint_path, *version);
    if (!fs::exists(r.dir_, ec)) {
      auto have = committed_checkpoint_versions(checkpoint_path);
      return fail("checkpoint version {} does not exist in {} (committed versions: {})", *version,
                  checkpoint_path.string(), have.empty() ? "none" : fmt::format("{}", fmt::join(have, ", ")));
    }
    if (!fs::exists(r.dir_ / manifest_name, ec))
      return fail("checkpoint version {} in {} was never committed (no {}): its writer crashed or is still running",
                  *version, r.dir_.string(), manifest_name);
    auto m = read_checkpoint_manifest(r.dir_);
    if (!m)
      return std::unexpected(m.error());
    r.manifest_ = std::move(*m);
  } else {
    auto versions = committed_checkpoint_versions(checkpoint_path);
    bool found = false;
    for (auto v = versions.rbegin(); v != versions.rend() && !found; ++v) {
      r.dir_ = checkpoint_version_dir(checkpoint_path, *v);
      auto m = read_checkpoint_manifest(r.dir_);
      if (!m) {
        spdlog::warn("ignoring checkpoint version {}: {}", *v, m.error().message);
        continue;
      }
      r.manifest_ = std::move(*m);
      found = true;
    }
    if (!found)
      return fail("no committed checkpoint in {}{}", checkpoint_path.string(),
                  versions.empty() ? "; train first" : " (every manifest there is corrupt)");
  }
  if (r.manifest_.dataset != expected_dataset)
    return fail("checkpoint {}: made from dataset {} but this entity path is dataset {}", r.dir_.string(),
                r.manifest_.dataset.hex(), expected_dataset.hex());
  for (auto& f : r.manifest_.files) {
    auto path = r.path_of(f.name);
    auto size = fs::file_size(path, ec);
    if (ec && !f.nodes.empty())
      continue; // on other nodes: reading it says where
    if (ec)
      return fail("checkpoint version {} in {} is incomplete: {} is missing", r.manifest_.version, r.dir_.string(),
                  f.name);
    if (size < f.bytes)
      return fail("{}: truncated: expected {} bytes, found {}", path.string(), f.bytes, size);
    if (size != f.bytes)
      return fail("{}: expected {} bytes, found {}: file is corrupt", path.string(), f.bytes, size);
  }
  return r;
}

expected<void> checkpoint_reader::check_schema(const json& schema) const {
  auto& old = manifest_.schema;
  if (old == schema)
    return {};
  std::vector<std::string> diffs;
  auto by_name = [](const json& list) {
    std::map<std::string, json> out;
    for (auto& e : list)
      out[e.value("name", "")] = e;
    return out;
  };
  auto then = by_name(old.value("entities", json::array()));
  auto now = by_name(schema.value("entities", json::array()));
  for (auto& [name, e] : then) {
    auto it = now.find(name);
    if (it == now.end()) {
      diffs.push_back(fmt::format("entity type '{}' is gone from the config", name));
      continue;
    }
    for (auto key : {"num_partitions", "dimension", "featurized"})
      if (e.value(key, json()) != it->second.value(key, json()))
        diffs.push_back(fmt::format("entity type '{}': {} was {}, now {}", name, key, e.value(key, json()).dump(),
                                    it->second.value(key, json()).dump()));
  }
  for (auto& [name, e] : now)
    if (!then.contains(name))
      diffs.push_back(fmt::format("entity type '{}' is new in the config", name));
  auto rel_then = old.value("relations", json::array());
  auto rel_now = schema.value("relations", json::array());
  if (rel_then.size() != rel_now.size())
    diffs.push_back(fmt::format("{} relations then, {} now", rel_then.size(), rel_now.size()));
  for (std::size_t i = 0; i < std::min(rel_then.size(), rel_now.size()); ++i)
    if (rel_then[i] != rel_now[i])
      diffs.push_back(fmt::format("relation {} was {}, now {}", i, rel_then[i].dump(), rel_now[i].dump()));
  if (old.value("dynamic_relations", false) != schema.value("dynamic_relations", false))
    diffs.push_back("dynamic_relations differs");
  if (diffs.empty())
    diffs.push_back("the schemas differ");
  return fail("checkpoint {} was trained with another schema ({}); use a new checkpoint_path or restore the config",
              dir_.string(), fmt::join(diffs, "; "));
}

expected<const checkpoint_table*> checkpoint_reader::table(std::string_view type, std::int64_t partition) const {
  if (auto t = manifest_.table(type, partition))
    return t;
  return fail("checkpoint {} holds no embeddings for entity type '{}' partition {}", dir_.string(), type, partition);
}

expected<void> checkpoint_reader::read_into(const std::string& file, std::span<const std::int64_t> shape,
                                            std::span<float> out) const {
  auto path = path_of(file);
  if (auto* entry = manifest_.file(file); entry && !entry->nodes.empty()) {
    std::error_code ec;
    if (!fs::exists(path, ec))
      return fail("{} is not here: checkpoint_mode = \"local\" left it in the checkpoint_path of node(s) {}; run "
                  "this on one of them, or copy their {} here",
                  path.string(), fmt::join(entry->nodes, ", "), "tables/");
  }
  if (static_cast<std::uint64_t>(element_count(shape)) != out.size())
    return fail("{}: holds {} floats but the caller expects {}", path.string(), element_count(shape), out.size());
  auto header = read_tensor_header(path, manifest_.dataset);
  if (!header)
    return std::unexpected(header.error());
  if (!std::equal(header->shape.begin(), header->shape.end(), shape.begin(), shape.end()))
    return fail("{}: shape {} does not match the manifest's {}: file is corrupt", path.string(),
                shape_text(header->shape), shape_text(shape));
  auto entry = manifest_.file(file);
  if (!entry || entry->checksum != header->payload_checksum)
    return fail("{}: checksum differs from the manifest of version {}: file is corrupt or from another version",
                path.string(), manifest_.version);
  if (auto ok = read_tensor_file_into(path, manifest_.dataset, out); !ok)
    return std::unexpected(ok.error());
  return {};
}

expected<void> checkpoint_reader::embeddings_into(std::string_view type, std::int64_t partition,
                                                  std::span<float> out) const {
  auto t = table(type, partition);
  if (!t)
    return std::unexpected(t.error());
  std::int64_t shape[] = {(*t)->rows, (*t)->dim};
  return read_into((*t)->embeddings_file, shape, out);
}

expected<tensor> checkpoint_reader::embeddings(std::string_view type, std::int64_t partition) const {
  auto t = table(type, partition);
  if (!t)
    return std::unexpected(t.error());
  tensor out{{(*t)->rows, (*t)->dim}, std::vector<float>(static_cast<std::size_t>((*t)->rows * (*t)->dim))};
  if (auto ok = read_into((*t)->embeddings_file, out.shape, out.data); !ok)
    return std::unexpected(ok.error());
  return out;
}

expected<void> checkpoint_reader::optimizer_into(std::string_view type, std::int64_t partition,
                                                 std::span<float> out) const {
  auto t = table(type, partition);
  if (!t)
    return std::unexpected(t.error());
  if ((*t)->optimizer_file.empty())
    return fail("checkpoint {} holds no optimizer state for entity type '{}' partition {}", dir_.string(), type,
                partition);
  if ((*t)->state_width == 1) {
    std::int64_t shape[] = {(*t)->rows};
    return read_into((*t)->optimizer_file, shape, out);
  }
  std::int64_t shape[] = {(*t)->rows, (*t)->state_width};
  return read_into((*t)->optimizer_file, shape, out);
}

expected<tensor> checkpoint_reader::optimizer(std::string_view type, std::int64_t partition) const {
  auto t = table(type, partition);
  if (!t)
    return std::unexpected(t.error());
  const auto w = (*t)->state_width;
  tensor out{w == 1 ? std::vector<std::int64_t>{(*t)->rows} : std::vector<std::int64_t>{(*t)->rows, w},
             std::vector<float>(static_cast<std::size_t>((*t)->rows * w))};
  if (auto ok = optimizer_into(type, partition, out.data); !ok)
    return std::unexpected(ok.error());
  return out;
}

expected<shared_tensors> checkpoint_reader::shared() const {
  shared_tensors out;
  out.entries = manifest_.shared;
  std::uint64_t total = 0;
  for (auto& e : out.entries)
    total += e.size;
  out.data.resize(total);
  std::int64_t shape[] = {static_cast<std::int64_t>(total)};
  if (auto ok = read_into(std::string(shared_file_name), shape, out.data); !ok)
    return std::unexpected(ok.error());
  return out;
}

fs::path checkpoint_reader::path_of(std::string_view file) const {
  if (file.starts_with(tables_prefix))
    return dir_.parent_path() / file;
  return dir_ / file;
}

expected<std::string> checkpoint_reader::config_toml() const {
  auto path = dir_ / config_file_name;
  auto text = read_file(path);
  if (!text)
    return text;
  auto entry = manifest_.file(config_file_name);
  if (!entry || entry->checksum != checksum(*text))
    return fail("{}: checksum mismatch: file is corrupt", path.string());
  return text;
}

} // namespace abg::storage
