// The Debian package graph: the main job's default data, a real graph that
// every Debian machine carries. Reads the control-file stanzas that
// `apt-cache dumpavail` prints and turns their relationship fields into
// head<TAB>relation<TAB>tail edges. docs/debian-graph.md describes the rules:
//  - entities are package names (Package:, names in relationship fields and
//    virtual packages named in Provides:), lower-cased, without `:arch`;
//  - `a | b` gives one edge per alternative;
//  - version constraints `(>= 1.2)`, architecture restrictions `[amd64]` and
//    build profiles `<!nocheck>` are dropped;
//  - a package in several stanzas (versions, architectures) contributes the
//    union of its edges, each edge once.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace abg::debian {

/// The relationship fields that become relations, in output order.
enum class relation : std::uint8_t {
  depends,
  pre_depends,
  recommends,
  suggests,
  enhances,
  conflicts,
  breaks,
  replaces,
  provides,
};

inline constexpr std::size_t relation_count = 9;

/// Relation names as written to the TSV: the field names, lower-cased.
inline constexpr std::array<std::string_view, relation_count> relation_names{
    "depends", "pre-depends", "recommends", "suggests", "enhances",
    "conflicts", "breaks", "replaces", "provides"};

inline constexpr std::string_view name_of(relation r) {
  return relation_names[static_cast<std::size_t>(r)];
}

/// One edge: head and tail are entity ids (indices into graph::names).
struct edge {
  std::uint32_t head = 0;
  relation rel = relation::depends;
  std::uint32_t tail = 0;
  friend bool operator==(const edge&, const edge&) = default;
};

/// The converted graph with the counts the converter reports.
struct graph {
  /// Entity id -> name, ids in order of first appearance in the input.
  std::vector<std::string> names;
  /// Deduplicated edges, sorted by (head name, relation, tail name).
  std::vector<edge> edges;

  std::size_t stanzas = 0;          ///< stanzas with a Package: field
  std::size_t skipped_stanzas = 0;  ///< stanzas without one (skipped)
  std::size_t packages = 0;         ///< distinct Package: names
  std::size_t virtual_packages = 0; ///< named in Provides:, no stanza of their own
  std::size_t referenced_only = 0;  ///< only named in other relationship fields
  std::size_t entities = 0;         ///< distinct names appearing in edges
  std::array<std::size_t, relation_count> edges_per_relation{};
};

/// Streaming parser: feed() the input in pieces (cut anywhere), then finish().
/// Memory grows with the number of distinct names and edges, not with the
/// input's size: only an unfinished stanza is kept between pieces.
class graph_builder {
public:
  void feed(std::string_view chunk);
  graph finish();

private:
  void parse_stanzas(std::string_view text);
  void end_stanza();
  std::uint32_t intern(std::string_view raw_name);
  void add_relationship_field(relation rel, std::string_view value);

  std::string pending_; // an unfinished stanza carried to the next piece

  // current stanza
  std::string_view package_;
  bool has_package_ = false;
  std::array<std::string_view, relation_count> fields_{};
  std::array<bool, relation_count> field_seen_{};

  std::deque<std::string> names_; // stable storage for the map's keys
  std::unordered_map<std::string_view, std::uint32_t> ids_;
  std::vector<std::uint8_t> is_package_;  // per id
  std::vector<std::uint8_t> is_provided_; // per id
  std::vector<std::uint64_t> raw_edges_;  // head<<36 | rel<<32 | tail, not yet deduplicated
  std::size_t stanzas_ = 0;
  std::size_t skipped_stanzas_ = 0;
};

/// Parses a whole dumpavail text at once.
graph parse_dumpavail(std::string_view text);

/// The edges as TSV, one `head<TAB>relation<TAB>tail\n` line each.
std::string to_tsv(const graph& g);

/// The package name in one alternative of a relationship field, or "" when
/// there is none: drops `(version)`, `[arch]`, `<profile>` and `:arch`.
/// Not lower-cased.
std::string_view alternative_name(std::string_view alternative);

} // namespace abg::debian
