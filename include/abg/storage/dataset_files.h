// The files of an imported dataset as a config names them (its entity path
// and every edge path), with their sizes and checksums: what a node of a
// cluster compares with the coordinator's copy at join, and fetches where
// they differ (docs/cluster.md, "Data at join").
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "abg/config.h"
#include "abg/error.h"

namespace abg::storage {

/// One file: `root` 0 is entity_path, root i > 0 is edge_paths[i - 1];
/// `name` is relative to the root (a plain file name, never a path).
struct dataset_file {
  std::uint32_t root = 0;
  std::string name;
  std::uint64_t bytes = 0;
  std::uint64_t checksum = 0; // XXH3-64 of the whole file
};

/// The folder of `root` under this config (relative paths as in the config).
std::filesystem::path dataset_root(const config& cfg, std::uint32_t root);
/// "entity_path" or "edge_paths[i]", for messages.
std::string dataset_root_label(std::uint32_t root);
/// Whether `name` may name a file of a root: a plain file name, no path.
bool valid_dataset_file_name(const std::string& name);

/// Every file of the dataset, listed from its commit points (entities.json
/// and each edge path's manifest.json; stray files are not part of it), the
/// commit points last within their root, so that copying in this order
/// leaves a copy that is complete or detectably different.
expected<std::vector<dataset_file>> list_dataset_files(const config& cfg);

/// XXH3-64 of a whole file, streamed; errors name the file.
expected<std::uint64_t> file_checksum(const std::filesystem::path& file);

/// Why the local copy of `f` differs ("missing", "N bytes, the coordinator's
/// M", "checksum differs"), or an empty string when it is the same file.
std::string dataset_file_difference(const config& cfg, const dataset_file& f);

} // namespace abg::storage
