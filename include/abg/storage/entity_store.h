// The entity path: per entity type and partition the dictionary of names
// (offset -> name), the relation names, and the dataset id that every edge
// path and checkpoint made from it records. Layout in docs/formats.md.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "abg/error.h"
#include "abg/storage/files.h"

namespace abg::storage {

inline constexpr std::uint32_t entity_store_format_version = 1;

struct entity_type_info {
  std::string name;
  std::vector<std::int64_t> counts; // entities per partition; size() = num_partitions
  std::int64_t num_partitions() const { return static_cast<std::int64_t>(counts.size()); }
  std::int64_t total() const;
};

/// entity_path/entities.json: what the entity path holds.
struct entity_store_meta {
  dataset_id id;
  std::vector<entity_type_info> types;
  /// Relation names by id: the config's relations, or the dynamic ones found by import.
  std::vector<std::string> relation_names;
  bool dynamic_relations = false;

  const entity_type_info* type(std::string_view name) const;
};

/// entity_path/entities.json
std::filesystem::path entity_meta_file(const std::filesystem::path& entity_path);

/// Reads and validates entity_path/entities.json.
expected<entity_store_meta> read_entity_meta(const std::filesystem::path& entity_path);

/// Writes entity_path/entities.json atomically (the commit point of an import's dictionaries).
expected<void> write_entity_meta(const std::filesystem::path& entity_path, const entity_store_meta& meta);

/// The file holding the names of (type, partition).
std::filesystem::path entity_names_file(const std::filesystem::path& entity_path, std::string_view type,
                                        std::int64_t partition);

/// The names of (type, partition) by offset; validates magic, version, dataset id, count and checksum.
expected<std::vector<std::string>> read_entity_names(const std::filesystem::path& entity_path,
                                                     const entity_store_meta& meta, std::string_view type,
                                                     std::int64_t partition);

/// Writes the names of (type, partition) atomically.
expected<void> write_entity_names(const std::filesystem::path& entity_path, const dataset_id& id,
                                  std::string_view type, std::int64_t partition,
                                  const std::vector<std::string_view>& names);

} // namespace abg::storage
