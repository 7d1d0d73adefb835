// `abg generate --direct CONFIG`: a generated graph written straight into an
// imported dataset (the importer's formats, docs/formats.md), skipping the
// TSV and its parsing: what `abg generate` then `abg import` would give for
// the same graph, but every entity id 0..N-1 is in the dictionary (the
// importer keeps only entities that some edge names) and partition p holds
// the contiguous id range [ceil(p N / P), ceil((p + 1) N / P)) (the ids are
// already a seeded permutation of the ranks, so this is PBG's slicing of
// shuffled names). Memory: one partition's names at a time, and per thread
// one block of edges.
#pragma once

#include <cstdint>
#include <functional>
#include <string_view>

#include "abg/config.h"
#include "abg/error.h"
#include "abg/generate/graph.h"

namespace abg::generate {

struct direct_report {
  std::uint64_t edges = 0, buckets = 0;
  double seconds = 0;
};

/// Refuses a config the generated graph cannot fill, naming the key and the
/// fix: one entity type (not featurized) and one edge path; with
/// dynamic_relations any relation count, else exactly spec.relations
/// relations, each from that type to itself; an entity path not imported yet.
expected<void> check_direct(const config& cfg, const graph_spec& spec);

/// Writes the dictionaries (names files, then entities.json), then the edge
/// path (bucket files, then its manifest). `progress(phase, edges done)` may be empty.
expected<direct_report> write_dataset(const config& cfg, const graph_spec& spec, unsigned threads,
                                      const std::function<void(std::string_view, std::uint64_t)>& progress = {});

} // namespace abg::generate
