#include "abg/eval/filtered.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

#include <fmt/ranges.h>
#include <torch/torch.h>

#include "abg/storage/edge_manifest.h"
#include "runtime/eval/parallel.h"

namespace abg::eval {
namespace {

bool lhs_order(const triple& a, const triple& b) {
  return std::tie(a.rel, a.lhs, a.rhs) < std::tie(b.rel, b.lhs, b.rhs);
}
bool rhs_order(const triple& a, const triple& b) {
  return std::tie(a.rel, a.rhs, a.lhs) < std::tie(b.rel, b.rhs, b.lhs);
}

// One batch of test edges of one relation: indices into the test span.
struct work_item {
  std::int64_t rel = 0;
  std::vector<std::size_t> edges;
};

} // namespace

known_triples::known_triples(std::vector<triple> triples) : by_lhs_(std::move(triples)) {
  std::sort(by_lhs_.begin(), by_lhs_.end(), lhs_order);
  by_lhs_.erase(std::unique(by_lhs_.begin(), by_lhs_.end()), by_lhs_.end());
  by_lhs_.shrink_to_fit();
  by_rhs_ = by_lhs_;
  std::sort(by_rhs_.begin(), by_rhs_.end(), rhs_order);
}

bool known_triples::contains(const triple& t) const { return std::binary_search(by_lhs_.begin(), by_lhs_.end(), t, lhs_order); }

std::span<const triple> known_triples::with_lhs(std::int64_t rel, std::int64_t lhs) const {
  auto lo = std::lower_bound(by_lhs_.begin(), by_lhs_.end(), std::pair{rel, lhs},
                             [](const triple& t, const std::pair<std::int64_t, std::int64_t>& key) {
                               return std::tie(t.rel, t.lhs) < std::tie(key.first, key.second);
                             });
  auto hi = std::upper_bound(lo, by_lhs_.end(), std::pair{rel, lhs},
                             [](const std::pair<std::int64_t, std::int64_t>& key, const triple& t) {
                               return std::tie(key.first, key.second) < std::tie(t.rel, t.lhs);
                             });
  return {lo, hi};
}

std::span<const triple> known_triples::with_rhs(std::int64_t rel, std::int64_t rhs) const {
  auto lo = std::lower_bound(by_rhs_.begin(), by_rhs_.end(), std::pair{rel, rhs},
                             [](const triple& t, const std::pair<std::int64_t, std::int64_t>& key) {
                               return std::tie(t.rel, t.rhs) < std::tie(key.first, key.second);
                             });
  auto hi = std::upper_bound(lo, by_rhs_.end(), std::pair{rel, rhs},
                             [](const std::pair<std::int64_t, std::int64_t>& key, const triple& t) {
                               return std::tie(key.first, key.second) < std::tie(t.rel, t.rhs);
                             });
  return {lo, hi};
}

expected<void> append_bucket_edges(const storage::bucket_reader& bucket, std::int64_t lhs_partition,
                                   std::int64_t rhs_partition, const entity_space& space, std::vector<triple>& out) {
  const auto n = bucket.size();
  out.reserve(out.size() + n);
  for (std::uint64_t i = 0; i < n; ++i) {
    const auto rel = static_cast<std::int64_t>(bucket.rel(i));
    if (rel >= space.num_relations())
      return fail("edge {} of bucket ({}, {}) has relation id {}, but there are {} relations", i, lhs_partition,
                  rhs_partition, rel, space.num_relations());
    const auto& li = space.of(rel, side::lhs);
    const auto& ri = space.of(rel, side::rhs);
    const auto lp = li.num_partitions() == 1 ? 0 : lhs_partition;
    const auto rp = ri.num_partitions() == 1 ? 0 : rhs_partition;
    if (lp >= li.num_partitions() || rp >= ri.num_partitions())
      return fail("bucket ({}, {}) is outside the entity types' partitions", lhs_partition, rhs_partition);
    const auto lo = static_cast<std::int64_t>(bucket.lhs(i));
    const auto ro = static_cast<std::int64_t>(bucket.rhs(i));
    if (lo >= li.count(lp) || ro >= ri.count(rp))
      return fail("edge {} of bucket ({}, {}) refers to an entity beyond its partition (lhs {} of {}, rhs {} of {})", i,
                  lhs_partition, rhs_partition, lo, li.count(lp), ro, ri.count(rp));
    out.push_back(triple{li.global(lp, lo), rel, ri.global(rp, ro)});
  }
  return {};
}

namespace {
expected<void> append_edge_path(const std::filesystem::path& edge_path, const entity_space& space,
                                const storage::dataset_id* expected_id, std::vector<triple>& out) {
  auto manifest = storage::read_edge_manifest(edge_path);
  if (!manifest)
    return std::unexpected(manifest.error());
  for (const auto& b : manifest->buckets) {
    auto reader = storage::bucket_reader::open(edge_path / b.file, expected_id);
    if (!reader)
      return std::unexpected(reader.error());
    if (auto ok = append_bucket_edges(*reader, b.lhs, b.rhs, space, out); !ok)
      return fail("{}: {}", (edge_path / b.file).string(), ok.error().message);
  }
  return {};
}
} // namespace

expected<std::vector<triple>> read_edge_path(const std::filesystem::path& edge_path, const entity_space& space,
                                             const storage::dataset_id* expected_id) {
  std::vector<triple> out;
  if (auto ok = append_edge_path(edge_path, space, expected_id, out); !ok)
    return std::unexpected(ok.error());
  return out;
}

expected<known_triples> load_known_triples(const std::vector<std::filesystem::path>& edge_paths,
                                           const entity_space& space, const storage::dataset_id* expected_id) {
  std::vector<triple> all;
  for (const auto& path : edge_paths)
    if (auto ok = append_edge_path(path, space, expected_id, all); !ok)
      return std::unexpected(ok.error());
  return known_triples(std::move(all));
}

std::int64_t filtered_batch_size(std::int64_t entities, std::size_t bytes_per_thread, std::int64_t max_batch) {
  const auto row = static_cast<std::size_t>(std::max<std::int64_t>(entities, 1)) * sizeof(float);
  const auto fits = static_cast<std::int64_t>(bytes_per_thread / row);
  return std::clamp<std::int64_t>(fits, 1, std::max<std::int64_t>(max_batch, 1));
}

expected<filtered_result> filtered_rank(std::span<const triple> test, const known_triples& known,
                                        const entity_space& space, const score_fn& score,
                                        const filtered_options& options) {
  if (options.batch_size < 1)
    return fail("filtered evaluation: batch_size must be >= 1, got {}", options.batch_size);
  filtered_result result;
  result.lhs_rank.assign(test.size(), 0);
  result.rhs_rank.assign(test.size(), 0);

  // Group by relation (stable), then cut into batches.
  std::map<std::int64_t, std::vector<std::size_t>> by_rel;
  for (std::size_t i = 0; i < test.size(); ++i) {
    if (test[i].rel < 0 || test[i].rel >= space.num_relations())
      return fail("test edge {} has relation id {}, but there are {} relations", i, test[i].rel,
                  space.num_relations());
    by_rel[test[i].rel].push_back(i);
  }
  std::vector<work_item> items;
  const auto batch = static_cast<std::size_t>(options.batch_size);
  for (auto& [rel, edges] : by_rel)
    for (std::size_t b = 0; b < edges.size(); b += batch)
      items.push_back(work_item{rel, std::vector<std::size_t>(edges.begin() + static_cast<std::ptrdiff_t>(b),
                                                              edges.begin() + static_cast<std::ptrdiff_t>(
                                                                                  std::min(edges.size(), b + batch)))});

  std::vector<eval_stats> states(static_cast<std::size_t>(std::max(options.threads, 1)));
  auto work = [&](eval_stats& stats, std::size_t item_index) {
    const auto& item = items[item_index];
    const auto b = static_cast<std::int64_t>(item.edges.size());
    stats.add_edges(item.rel, static_cast<std::uint64_t>(b));
    for (const side s : {side::lhs, side::rhs}) {
      if ((s == side::lhs && !options.rank_lhs) || (s == side::rhs && !options.rank_rhs))
        continue;
      const auto num_candidates = space.of(item.rel, s).total();
      auto anchors = torch::empty({b}, torch::kLong);
      auto* a = anchors.data_ptr<std::int64_t>();
      for (std::int64_t i = 0; i < b; ++i) {
        const auto& t = test[item.edges[static_cast<std::size_t>(i)]];
        a[i] = s == side::lhs ? t.rhs : t.lhs;
      }
      const auto candidates = torch::arange(num_candidates, torch::kLong);
      auto scores = score(s, item.rel, anchors, candidates);
      if (scores.dim() != 2 || scores.size(0) != b || scores.size(1) != num_candidates)
        throw std::runtime_error(fmt::format("the score function returned shape {} for {} edges and {} candidates",
                                             fmt::join(scores.sizes(), "x"), b, num_candidates));
      scores = scores.to(torch::kFloat).contiguous();
      const float* S = scores.data_ptr<float>();
      auto& ranks = s == side::lhs ? result.lhs_rank : result.rhs_rank;
      for (std::int64_t i = 0; i < b; ++i) {
        const auto edge = item.edges[static_cast<std::size_t>(i)];
        const auto& t = test[edge];
        const auto truth = s == side::lhs ? t.lhs : t.rhs;
        if (truth < 0 || truth >= num_candidates)
          throw std::runtime_error(fmt::format("test edge {} refers to entity {} of {}", edge, truth, num_candidates));
        const float* row = S + i * num_candidates;
        const float p = row[truth];
        // Candidates removed: the true entity and every other known true one.
        const auto filtered = s == side::lhs ? known.with_rhs(t.rel, t.rhs) : known.with_lhs(t.rel, t.lhs);
        std::int64_t removed = 1, removed_ge = 1, removed_lt = 0;
        for (const auto& f : filtered) {
          const auto c = s == side::lhs ? f.lhs : f.rhs;
          if (c == truth || c < 0 || c >= num_candidates)
            continue;
          ++removed;
          removed_ge += row[c] >= p;
          removed_lt += row[c] < p;
        }
        const auto negatives = num_candidates - removed;
        std::int64_t rank = 0, below = 0;
        if (std::isnan(p)) {
          rank = 1 + negatives; // a NaN positive is ranked last
        } else {
          std::int64_t ge = 0, lt = 0;
          for (std::int64_t c = 0; c < num_candidates; ++c) {
            ge += row[c] >= p;
            lt += row[c] < p;
          }
          rank = 1 + ge - removed_ge;
          below = lt - removed_lt;
        }
        ranks[edge] = rank;
        stats.add_rank(t.rel, rank);
        if (negatives > 0)
          stats.add_auc(t.rel, static_cast<double>(below) / static_cast<double>(negatives), 1.0);
      }
    }
  };
  if (auto ok = detail::run_parallel(items.size(), states, work); !ok)
    return std::unexpected(ok.error());
  for (const auto& s : states)
    result.stats.merge(s);
  return result;
}

} // namespace abg::eval
