// edge_path/manifest.json: what one edge path holds and the commit point of
// its import. Bucket files not listed here are not part of the edge path.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "abg/error.h"
#include "abg/storage/files.h"

namespace abg::storage {

inline constexpr std::uint32_t edge_manifest_format_version = 1;

struct manifest_bucket {
  std::int64_t lhs = 0, rhs = 0;
  std::uint64_t edges = 0;
  std::string file;
  std::uint64_t checksum = 0;
};

struct manifest_entity_type {
  std::string name;
  std::vector<std::int64_t> counts; // per partition, when this edge path was imported
};

struct edge_manifest {
  dataset_id id;
  std::int64_t lhs_partitions = 1, rhs_partitions = 1;
  std::vector<manifest_entity_type> entity_types;
  std::uint64_t num_relations = 0;
  bool has_weights = false;
  std::uint32_t id_width = 4;
  std::vector<std::string> sources; // the input files it was imported from
  std::vector<manifest_bucket> buckets; // non-empty buckets only

  std::uint64_t total_edges() const;
};

std::filesystem::path edge_manifest_file(const std::filesystem::path& edge_path);

expected<edge_manifest> read_edge_manifest(const std::filesystem::path& edge_path);

/// read_edge_manifest, refused when the edge path belongs to another dataset
/// than the entity path (`dataset`, at `entity_path`) or has another bucket
/// grid than the config implies (lhs x rhs partitions).
expected<edge_manifest> read_edge_manifest_for(const std::filesystem::path& edge_path, const dataset_id& dataset,
                                               std::string_view entity_path, std::int64_t lhs_partitions,
                                               std::int64_t rhs_partitions);
expected<void> write_edge_manifest(const std::filesystem::path& edge_path, const edge_manifest& manifest);

} // namespace abg::storage
