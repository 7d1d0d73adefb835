#include "abg/storage/edge_manifest.h"

#include <nlohmann/json.hpp>

namespace abg::storage {

namespace fs = std::filesystem;
using json = nlohmann::json;

std::uint64_t edge_manifest::total_edges() const {
  std::uint64_t sum = 0;
  for (auto& b : buckets)
    sum += b.edges;
  return sum;
}

fs::path edge_manifest_file(const fs::path& edge_path) {
  return edge_path / "manifest.json";
}

expected<edge_manifest> read_edge_manifest(const fs::path& edge_path) {
  auto file = edge_manifest_file(edge_path);
  std::error_code ec;
  if (!fs::exists(file, ec))
    return fail("{} does not exist: edge path {} has not been imported; run `abg import`", file.string(),
                edge_path.string());
  auto text = read_file(file);
  if (!text)
    return std::unexpected(text.error());
  auto bad = [&](std::string_view what) {
    return fail("{} is corrupt ({}); re-run `abg import` for this edge path", file.string(), what);
  };
  auto doc = json::parse(*text, nullptr, false);
  if (doc.is_discarded() || !doc.is_object())
    return bad("not valid JSON");
  try {
    auto version = doc.at("format_version").get<std::uint32_t>();
    if (version != edge_manifest_format_version)
      return fail("{} has format version {}, this abg reads version {}; re-run `abg import`", file.string(),
                  version, edge_manifest_format_version);
    edge_manifest m;
    auto id = dataset_id::parse(doc.at("dataset_id").get<std::string>());
    if (!id)
      return bad(id.error().message);
    m.id = *id;
    m.lhs_partitions = doc.at("lhs_partitions").get<std::int64_t>();
    m.rhs_partitions = doc.at("rhs_partitions").get<std::int64_t>();
    for (auto& t : doc.at("entity_types"))
      m.entity_types.push_back({t.at("name").get<std::string>(), t.at("counts").get<std::vector<std::int64_t>>()});
    m.num_relations = doc.at("num_relations").get<std::uint64_t>();
    m.has_weights = doc.at("has_weights").get<bool>();
    m.id_width = doc.at("id_width").get<std::uint32_t>();
    m.sources = doc.at("sources").get<std::vector<std::string>>();
    for (auto& b : doc.at("buckets")) {
      manifest_bucket mb{b.at("lhs").get<std::int64_t>(), b.at("rhs").get<std::int64_t>(),
                         b.at("edges").get<std::uint64_t>(), b.at("file").get<std::string>(), 0};
      auto sum = b.at("checksum").get<std::string>();
      if (sum.size() != 16 || sum.find_first_not_of("0123456789abcdef") != std::string::npos)
        return bad(fmt::format("checksum '{}' of bucket ({}, {}) is not 16 hex digits", sum, mb.lhs, mb.rhs));
      mb.checksum = std::stoull(sum, nullptr, 16);
      if (mb.lhs < 0 || mb.lhs >= m.lhs_partitions || mb.rhs < 0 || mb.rhs >= m.rhs_partitions)
        return bad(fmt::format("bucket ({}, {}) outside the {}x{} grid", mb.lhs, mb.rhs, m.lhs_partitions,
                               m.rhs_partitions));
      if (mb.file.find('/') != std::string::npos)
        return bad(fmt::format("bucket file name '{}' is not a plain file name", mb.file));
      m.buckets.push_back(std::move(mb));
    }
    return m;
  } catch (const json::exception& e) {
    return bad(e.what());
  }
}

expected<void> write_edge_manifest(const fs::path& edge_path, const edge_manifest& m) {
  json types = json::array();
  for (auto& t : m.entity_types)
    types.push_back({{"name", t.name}, {"num_partitions", t.counts.size()}, {"counts", t.counts}});
  json buckets = json::array();
  for (auto& b : m.buckets)
    buckets.push_back(
      {{"lhs", b.lhs}, {"rhs", b.rhs}, {"edges", b.edges}, {"file", b.file}, {"checksum", checksum_hex(b.checksum)}});
  json doc = {{"format_version", edge_manifest_format_version},
              {"dataset_id", m.id.hex()},
              {"lhs_partitions", m.lhs_partitions},
              {"rhs_partitions", m.rhs_partitions},
              {"entity_types", std::move(types)},
              {"num_relations", m.num_relations},
              {"has_weights", m.has_weights},
              {"id_width", m.id_width},
              {"sources", m.sources},
              {"total_edges", m.total_edges()},
              {"buckets", std::move(buckets)}};
  // Source file names are only shown: one that is not UTF-8 is kept with
  // U+FFFD in place of its stray bytes.
  return write_file_atomic(edge_manifest_file(edge_path),
                           doc.dump(2, ' ', false, json::error_handler_t::replace) + "\n");
}

expected<edge_manifest> read_edge_manifest_for(const fs::path& edge_path, const dataset_id& dataset,
                                               std::string_view entity_path, std::int64_t lhs_partitions,
                                               std::int64_t rhs_partitions) {
  auto manifest = read_edge_manifest(edge_path);
  if (!manifest)
    return manifest;
  if (manifest->id != dataset)
    return fail("edge path {} was imported into dataset {}, but entity path {} is dataset {}; re-import it",
                edge_path.string(), manifest->id.hex(), entity_path, dataset.hex());
  if (manifest->lhs_partitions != lhs_partitions || manifest->rhs_partitions != rhs_partitions)
    return fail("edge path {} has a {}x{} bucket grid, the config implies {}x{}; re-run `abg import`",
                edge_path.string(), manifest->lhs_partitions, manifest->rhs_partitions, lhs_partitions,
                rhs_partitions);
  return manifest;
}

} // namespace abg::storage
