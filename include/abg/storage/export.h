// The exporter: a committed checkpoint plus the entity names, as PBG's TSV
// layout or as NumPy .npy files (for FAISS, pandas). Formats and name escaping
// in docs/formats.md.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "abg/config.h"
#include "abg/error.h"

namespace abg::storage {

enum class export_format { tsv, npy };

struct export_options {
  export_format format = export_format::tsv;
  /// tsv: the entities file (default entities.tsv); npy: a directory (default export).
  std::filesystem::path entities_output;
  /// tsv: the relation parameters file (default relation_types.tsv); npy: a
  /// directory (default: the entities output directory).
  std::filesystem::path relation_types_output;
  std::optional<std::int64_t> version; // default: the newest committed version
  bool force = false;                  // overwrite existing outputs
};

struct export_summary {
  std::int64_t version = 0;
  std::int64_t entities = 0;
  std::int64_t relation_parameters = 0;
  std::vector<std::filesystem::path> files; // everything written
};

/// Exports config.checkpoint_path with the names of config.entity_path. Refuses
/// existing outputs unless options.force, before writing anything; every file
/// is written atomically. Entity vectors include their type's global embedding.
expected<export_summary> export_checkpoint(const config& c, const export_options& options);

/// Escapes a name for one TSV field or line: backslash, tab, newline and
/// carriage return become \\ \t \n \r; everything else is kept byte for byte.
std::string escape_name(std::string_view name);
/// Inverse of escape_name(); unknown escapes are kept as they are.
std::string unescape_name(std::string_view escaped);

/// The NumPy format 1.0 header of a little-endian float32 C-order array.
std::string npy_header(std::span<const std::int64_t> shape);

} // namespace abg::storage
