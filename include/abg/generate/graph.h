// `abg generate`: a multi-relation graph with skewed degrees, for scale tests
// and benchmarks (docs/generate.md has the model). Each edge draws its head
// and its tail independently from one Zipf distribution over entity ranks
// (P(rank k) proportional to k^-power_law; a tail equal to its head is drawn
// again) and its relation from a Zipf distribution over relation ranks with
// the same exponent; a seeded permutation scatters entity ranks over ids.
// Edges come in blocks of block_edges, each generated from (seed, block
// index) alone: the graph depends on the spec and the seed only, never on
// the number of threads.
#pragma once

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "abg/error.h"
#include "abg/generate/permutation.h"
#include "abg/generate/zipf.h"

namespace abg::generate {

struct graph_spec {
  std::uint64_t entities = 0;
  std::uint64_t edges = 0;
  std::uint64_t relations = 1;
  double power_law = 0.8; // Zipf exponent of entity and relation ranks; 0: uniform
  std::uint64_t seed = 0;
};

/// Refuses what cannot be generated, naming the option and a fix.
expected<void> check(const graph_spec& spec);

inline constexpr std::uint64_t block_edges = std::uint64_t{1} << 18;

struct edge {
  std::uint64_t head = 0, relation = 0, tail = 0;
};

class graph_generator {
public:
  /// `spec` must pass check().
  explicit graph_generator(const graph_spec& spec);

  std::uint64_t blocks() const { return (spec_.edges + block_edges - 1) / block_edges; }
  std::uint64_t block_size(std::uint64_t block) const;

  /// Calls fn(edge) for every edge of block `block`, in order.
  template <class Fn>
  void for_each_edge(std::uint64_t block, Fn&& fn) const {
    auto rng = splitmix64::stream(spec_.seed, block);
    const auto n = block_size(block);
    for (std::uint64_t i = 0; i < n; ++i) {
      edge e;
      e.head = ids_(entity_rank_(rng));
      do
        e.tail = ids_(entity_rank_(rng));
      while (e.tail == e.head && spec_.entities > 1);
      // Relations are few: their Zipf probabilities as a table, searched.
      const double u = rng.uniform();
      e.relation = static_cast<std::uint64_t>(std::upper_bound(relation_cdf_.begin(), relation_cdf_.end() - 1, u) -
                                              relation_cdf_.begin());
      fn(e);
    }
  }

  const graph_spec& spec() const { return spec_; }

private:
  graph_spec spec_;
  zipf_sampler entity_rank_;
  std::vector<double> relation_cdf_; // P(rank <= k), the last exactly 1
  permutation ids_;
};

/// Entity and relation names as written: "e{id}" and "r{id}".
void append_entity_name(std::string& out, std::uint64_t id);
void append_relation_name(std::string& out, std::uint64_t id);

struct tsv_report {
  std::uint64_t edges = 0, bytes = 0;
  double seconds = 0;
};

/// Writes the graph as head<TAB>relation<TAB>tail lines to `path` ("-":
/// standard output) with `threads` generating threads; a file appears only
/// once complete and synced (a failure leaves no partial file). `progress`
/// (may be empty) gets the edges written so far after each block.
expected<tsv_report> write_tsv(const graph_spec& spec, const std::filesystem::path& path, unsigned threads,
                               const std::function<void(std::uint64_t)>& progress = {});

} // namespace abg::generate
