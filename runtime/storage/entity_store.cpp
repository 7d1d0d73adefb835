#include "abg/storage/entity_store.h"

#include <bit>
#include <cstring>
#include <numeric>

#include <nlohmann/json.hpp>

#include "abg/storage/entity_names_view.h"
#include "runtime/storage/names_file.h"

namespace abg::storage {

namespace fs = std::filesystem;
using json = nlohmann::json;

fs::path entity_meta_file(const fs::path& entity_path) {
  return entity_path / "entities.json";
}

std::int64_t entity_type_info::total() const {
  return std::accumulate(counts.begin(), counts.end(), std::int64_t{0});
}

const entity_type_info* entity_store_meta::type(std::string_view name) const {
  for (auto& t : types)
    if (t.name == name)
      return &t;
  return nullptr;
}

expected<entity_store_meta> read_entity_meta(const fs::path& entity_path) {
  auto file = entity_meta_file(entity_path);
  std::error_code ec;
  if (!fs::exists(file, ec))
    return fail("{} does not exist: no entities imported into entity path {} yet; run `abg import` first",
                file.string(), entity_path.string());
  auto text = read_file(file);
  if (!text)
    return std::unexpected(text.error());
  auto bad = [&](std::string_view what) {
    return fail("{} is corrupt ({}); restore it or re-import into a new entity path", file.string(), what);
  };
  auto doc = json::parse(*text, nullptr, false);
  if (doc.is_discarded() || !doc.is_object())
    return bad("not valid JSON");
  try {
    auto version = doc.at("format_version").get<std::uint32_t>();
    if (version != entity_store_format_version)
      return fail("{} has format version {}, this abg reads version {}", file.string(), version,
                  entity_store_format_version);
    entity_store_meta meta;
    auto id = dataset_id::parse(doc.at("dataset_id").get<std::string>());
    if (!id)
      return bad(id.error().message);
    meta.id = *id;
    for (auto& t : doc.at("types")) {
      entity_type_info info{t.at("name").get<std::string>(), t.at("counts").get<std::vector<std::int64_t>>()};
      if (info.counts.empty())
        return bad(fmt::format("entity type '{}' has no partitions", info.name));
      for (auto c : info.counts)
        if (c < 0)
          return bad(fmt::format("entity type '{}' has a negative count", info.name));
      meta.types.push_back(std::move(info));
    }
    meta.relation_names = doc.at("relation_names").get<std::vector<std::string>>();
    meta.dynamic_relations = doc.at("dynamic_relations").get<bool>();
    return meta;
  } catch (const json::exception& e) {
    return bad(e.what());
  }
}

expected<void> write_entity_meta(const fs::path& entity_path, const entity_store_meta& meta) {
  json types = json::array();
  for (auto& t : meta.types)
    types.push_back({{"name", t.name}, {"num_partitions", t.num_partitions()}, {"counts", t.counts}});
  json doc = {{"format_version", entity_store_format_version},
              {"dataset_id", meta.id.hex()},
              {"types", std::move(types)},
              {"relation_names", meta.relation_names},
              {"dynamic_relations", meta.dynamic_relations}};
  std::string text;
  try {
    text = doc.dump(2) + "\n";
  } catch (const json::exception& e) { // a name that is not UTF-8: refused, nothing written
    return fail("cannot write {}: {}", entity_meta_file(entity_path).string(), e.what());
  }
  return write_file_atomic(entity_meta_file(entity_path), text);
}

fs::path entity_names_file(const fs::path& entity_path, std::string_view type, std::int64_t partition) {
  return entity_path / fmt::format("entity_names_{}_{}.abgn", type, partition);
}

expected<void> write_entity_names(const fs::path& entity_path, const dataset_id& id, std::string_view type,
                                  std::int64_t partition, const std::vector<std::string_view>& names) {
  std::vector<std::uint64_t> offsets(names.size() + 1, 0);
  for (std::size_t i = 0; i < names.size(); ++i)
    offsets[i + 1] = offsets[i] + names[i].size();
  std::string payload;
  payload.reserve(offsets.size() * 8 + offsets.back());
  payload.append(reinterpret_cast<const char*>(offsets.data()), offsets.size() * 8);
  for (auto n : names)
    payload.append(n);
  detail::names_header h{};
  std::memcpy(h.magic, detail::names_magic, 8);
  h.format_version = entity_store_format_version;
  std::memcpy(h.dataset, id.bytes.data(), 16);
  h.count = names.size();
  h.payload_checksum = checksum(payload);
  h.header_checksum = detail::names_header_sum(h);
  payload.insert(0, reinterpret_cast<const char*>(&h), sizeof h);
  return write_file_atomic(entity_names_file(entity_path, type, partition), payload);
}

expected<std::vector<std::string>> read_entity_names(const fs::path& entity_path, const entity_store_meta& meta,
                                                     std::string_view type, std::int64_t partition) {
  auto view = entity_names_view::open(entity_path, meta, type, partition);
  if (!view)
    return std::unexpected(view.error());
  std::vector<std::string> names;
  names.reserve(static_cast<std::size_t>(view->size()));
  for (std::int64_t i = 0; i < view->size(); ++i)
    names.emplace_back((*view)[i]);
  return names;
}

} // namespace abg::storage
