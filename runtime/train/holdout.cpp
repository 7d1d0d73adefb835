#include "abg/model/holdout.h"

#include <algorithm>
#include <cmath>
#include <random>

namespace abg::train {
namespace {

std::uint64_t mix(std::uint64_t x) { // splitmix64 finaliser
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

std::uint64_t combine(std::uint64_t h, std::int64_t v) { return mix(h ^ mix(static_cast<std::uint64_t>(v))); }

} // namespace

std::int64_t num_held_out(std::int64_t num_edges, double eval_fraction) {
  if (num_edges <= 0 || !(eval_fraction > 0))
    return 0;
  auto n = static_cast<std::int64_t>(std::floor(static_cast<double>(num_edges) * eval_fraction));
  return std::clamp<std::int64_t>(n, 0, num_edges);
}

std::uint64_t held_out_seed(std::uint64_t run_seed, std::int64_t edge_path, std::int64_t edge_chunk,
                            std::int64_t lhs_partition, std::int64_t rhs_partition) {
  auto h = mix(run_seed ^ 0x6576616c5f667261ULL); // "eval_fra": apart from the other seeds derived from run_seed
  h = combine(h, edge_path);
  h = combine(h, edge_chunk);
  h = combine(h, lhs_partition);
  return combine(h, rhs_partition);
}

std::vector<std::int64_t> held_out_indices(std::int64_t num_edges, double eval_fraction, std::uint64_t seed) {
  auto needed = num_held_out(num_edges, eval_fraction);
  std::vector<std::int64_t> out;
  out.reserve(static_cast<std::size_t>(needed));
  std::mt19937_64 rng(seed);
  // Edge i is taken with probability needed / (edges left), which picks every
  // subset of the size with the same probability.
  for (std::int64_t i = 0; needed > 0; ++i) {
    auto left = static_cast<std::uint64_t>(num_edges - i);
    if (rng() % left < static_cast<std::uint64_t>(needed)) {
      out.push_back(i);
      --needed;
    }
  }
  return out;
}

expected<held_out_split> split_held_out(const bucket_edges& edges, std::span<const std::int64_t> held_out) {
  const auto n = edges.size();
  const auto k = static_cast<std::int64_t>(held_out.size());
  for (std::int64_t j = 0; j < k; ++j) {
    auto i = held_out[static_cast<std::size_t>(j)];
    if (i < 0 || i >= n || (j > 0 && i <= held_out[static_cast<std::size_t>(j) - 1]))
      return fail("held-out edge indices must be ascending, distinct and below {}", n);
  }
  const bool weighted = edges.weight.defined();
  auto make = [&](std::int64_t size) {
    bucket_edges e;
    e.lhs = torch::empty({size}, torch::kInt64);
    e.rhs = torch::empty({size}, torch::kInt64);
    e.rel = torch::empty({size}, torch::kInt64);
    if (weighted)
      e.weight = torch::empty({size}, torch::kFloat32);
    return e;
  };
  held_out_split out{make(n - k), make(k)};
  if (n == 0)
    return out;
  const auto lhs = edges.lhs.contiguous(), rhs = edges.rhs.contiguous(), rel = edges.rel.contiguous();
  const auto weight = weighted ? edges.weight.to(torch::kFloat32).contiguous() : torch::Tensor{};
  const auto* l = lhs.data_ptr<std::int64_t>();
  const auto* r = rhs.data_ptr<std::int64_t>();
  const auto* t = rel.data_ptr<std::int64_t>();
  const float* w = weighted ? weight.data_ptr<float>() : nullptr;
  struct sink {
    std::int64_t *l, *r, *t;
    float* w;
  };
  auto sink_of = [&](bucket_edges& e) {
    return sink{e.lhs.data_ptr<std::int64_t>(), e.rhs.data_ptr<std::int64_t>(), e.rel.data_ptr<std::int64_t>(),
                weighted ? e.weight.data_ptr<float>() : nullptr};
  };
  auto train = sink_of(out.train), eval = sink_of(out.held_out);
  std::size_t next = 0; // next held-out index
  for (std::int64_t i = 0; i < n; ++i) {
    auto& to = next < held_out.size() && held_out[next] == i ? (++next, eval) : train;
    *to.l++ = l[i];
    *to.r++ = r[i];
    *to.t++ = t[i];
    if (weighted)
      *to.w++ = w[i];
  }
  return out;
}

} // namespace abg::train
