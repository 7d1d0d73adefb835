#include "abg/storage/entity_store.h"

#include <bit>
#include <cstring>
#include <numeric>

#include <nlohmann/json.hpp>

namespace abg::storage {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

constexpr char names_magic[8] = {'A', 'B', 'G', 'N', 'A', 'M', 'E', 'S'};

// Names file: this header, then (count + 1) uint64 offsets, then the name bytes.
struct names_header {
  char magic[8];
  std::uint32_t format_version;
  std::uint32_t reserved;
  std::uint8_t dataset[16];
  std::uint64_t count;
  std::uint64_t payload_checksum; // offsets and bytes
  std::uint64_t header_checksum;  // of the 48 bytes before it
  std::uint64_t padding;
};
static_assert(sizeof(names_header) == 64);
static_assert(std::endian::native == std::endian::little, "abg files are little-endian");

std::uint64_t header_sum(const names_header& h) {
  return checksum(std::string_view(reinterpret_cast<const char*>(&h), offsetof(names_header, header_checksum)));
}

fs::path meta_file(const fs::path& entity_path) {
  return entity_path / "entities.json";
}

} // namespace

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
  auto file = meta_file(entity_path);
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
  return write_file_atomic(meta_file(entity_path), doc.dump(2) + "\n");
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
  names_header h{};
  std::memcpy(h.magic, names_magic, 8);
  h.format_version = entity_store_format_version;
  std::memcpy(h.dataset, id.bytes.data(), 16);
  h.count = names.size();
  h.payload_checksum = checksum(payload);
  h.header_checksum = header_sum(h);
  payload.insert(0, reinterpret_cast<const char*>(&h), sizeof h);
  return write_file_atomic(entity_names_file(entity_path, type, partition), payload);
}

expected<std::vector<std::string>> read_entity_names(const fs::path& entity_path, const entity_store_meta& meta,
                                                     std::string_view type, std::int64_t partition) {
  auto info = meta.type(type);
  if (!info)
    return fail("entity type '{}' is not in entity path {}", type, entity_path.string());
  if (partition < 0 || partition >= info->num_partitions())
    return fail("entity type '{}' has {} partitions, no partition {}", type, info->num_partitions(), partition);
  auto file = entity_names_file(entity_path, type, partition);
  auto data = read_file(file);
  if (!data)
    return std::unexpected(data.error());
  auto bad = [&](std::string_view what) {
    return fail("entity names file {} is {}; restore it or re-import into a new entity path", file.string(), what);
  };
  if (data->size() < sizeof(names_header))
    return bad("truncated (shorter than its header)");
  names_header h;
  std::memcpy(&h, data->data(), sizeof h);
  if (std::memcmp(h.magic, names_magic, 8) != 0)
    return bad("not an abg names file (bad magic)");
  if (h.format_version != entity_store_format_version)
    return fail("entity names file {} has format version {}, this abg reads version {}", file.string(),
                h.format_version, entity_store_format_version);
  if (h.header_checksum != header_sum(h))
    return bad("corrupt (header checksum mismatch)");
  if (std::memcmp(h.dataset, meta.id.bytes.data(), 16) != 0) {
    dataset_id other;
    std::memcpy(other.bytes.data(), h.dataset, 16);
    return fail("entity names file {} belongs to dataset {}, but {} is dataset {}", file.string(), other.hex(),
                entity_path.string(), meta.id.hex());
  }
  std::string_view payload(data->data() + sizeof h, data->size() - sizeof h);
  if (h.count > payload.size() / 8 || (h.count + 1) * 8 > payload.size())
    return bad("truncated (offsets cut short)");
  if (checksum(payload) != h.payload_checksum)
    return bad("corrupt (checksum mismatch)");
  auto wanted = static_cast<std::uint64_t>(info->counts[static_cast<std::size_t>(partition)]);
  // An import writes names files before entities.json, its commit point; names
  // only ever get appended, so a file longer than the committed count is a
  // later import's unfinished work and its prefix is the committed dictionary.
  if (h.count < wanted)
    return bad(fmt::format("truncated: {} names, entities.json records {}", h.count, wanted));
  std::vector<std::uint64_t> offsets(h.count + 1);
  std::memcpy(offsets.data(), payload.data(), offsets.size() * 8);
  auto bytes = payload.substr(offsets.size() * 8);
  std::vector<std::string> names;
  names.reserve(wanted);
  for (std::uint64_t i = 0; i < wanted; ++i) {
    if (offsets[i] > offsets[i + 1] || offsets[i + 1] > bytes.size())
      return bad("corrupt (offsets out of range)");
    names.emplace_back(bytes.substr(offsets[i], offsets[i + 1] - offsets[i]));
  }
  return names;
}

} // namespace abg::storage
