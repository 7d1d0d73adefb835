// `abg import`: streams edge lists (TSV/CSV, plain or gzip) into an entity
// path (dictionaries) and one edge path per input (bucket files + manifest).
// Memory grows with the number of distinct entities, never with edges.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "abg/config.h"
#include "abg/edge_lines.h"
#include "abg/error.h"

namespace abg {

/// The columns and delimiter (edge_columns) plus what import does with the lines.
struct import_options : edge_columns {
  std::vector<std::filesystem::path> inputs; // one per entry of config.edge_paths
  bool skip_header = false;
  bool strict = false;                     // the first malformed line is fatal
  std::int64_t entity_min_count = 1;       // new entities seen fewer times are dropped
  std::int64_t relation_type_min_count = 1; // dynamic relations seen fewer times are dropped
  std::size_t max_reported = 10;           // malformed lines quoted in warnings
};

struct import_report {
  std::uint64_t lines = 0;             // data lines read (header and blank lines excluded)
  std::uint64_t edges = 0;             // edges written to buckets
  std::uint64_t malformed = 0;
  std::uint64_t dropped_min_count = 0; // edges whose entity or relation fell under a min count
  std::uint64_t new_entities = 0;
  std::uint64_t total_entities = 0;
  std::uint64_t relations = 0;
  std::uint64_t buckets = 0;           // non-empty bucket files written
  double seconds = 0;
};

struct import_callbacks {
  /// A malformed line or other note worth the user's attention.
  std::function<void(std::string_view)> warning;
  /// Called at the start of each phase, every few thousand edges, and at its end;
  /// `done` is the fraction of the phase completed (0..1).
  std::function<void(std::string_view phase, std::uint64_t edges, double seconds, double done)> progress;
};

expected<import_report> run_import(const config& cfg, const import_options& options,
                                   const import_callbacks& callbacks = {});

} // namespace abg
