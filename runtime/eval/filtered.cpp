#include "abg/eval/filtered.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <stdexcept>
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

namespace {

// Test edges of one relation ranked on one side, their true entities all in
// one partition of the side's type (their "home" block, scored first), and
// per edge what the candidates scored so far add up to.
struct ranked_batch {
  std::int64_t rel = 0;
  side s = side::rhs;
  std::size_t type = 0;
  std::int64_t home = 0;
  std::vector<std::size_t> edges;
  std::vector<float> positive;
  std::vector<std::int64_t> at_least, below, removed;
};

// The known true entities replacing the truth of `t` on side `s`, sorted.
std::span<const triple> filter_of(const known_triples& known, const triple& t, side s) {
  return s == side::lhs ? known.with_rhs(t.rel, t.rhs) : known.with_lhs(t.rel, t.lhs);
}
std::int64_t candidate_of(const triple& t, side s) { return s == side::lhs ? t.lhs : t.rhs; }

// Scores `batch` against partition `part` of its type and adds, per edge, the
// candidates of that block scoring >= and < the positive, leaving out the
// truth and the filtered ones. The home block also sets the positive.
void score_block(ranked_batch& batch, std::int64_t part, std::span<const triple> test, const known_triples& known,
                 const entity_space& space, const score_fn& score) {
  const auto& index = space.type(batch.type);
  const auto lo = index.begin(part), n = index.count(part);
  const auto b = static_cast<std::int64_t>(batch.edges.size());
  auto anchors = torch::empty({b}, torch::kLong);
  auto* a = anchors.data_ptr<std::int64_t>();
  for (std::int64_t i = 0; i < b; ++i) {
    const auto& t = test[batch.edges[static_cast<std::size_t>(i)]];
    a[i] = batch.s == side::lhs ? t.rhs : t.lhs;
  }
  auto scores = score(batch.s, batch.rel, anchors, torch::arange(lo, lo + n, torch::kLong));
  if (scores.dim() != 2 || scores.size(0) != b || scores.size(1) != n)
    throw std::runtime_error(fmt::format("the score function returned shape {} for {} edges and {} candidates",
                                         fmt::join(scores.sizes(), "x"), b, n));
  scores = scores.to(torch::kFloat).contiguous();
  const float* S = scores.data_ptr<float>();
  const bool home = part == batch.home;
  for (std::size_t i = 0; i < batch.edges.size(); ++i) {
    const auto& t = test[batch.edges[i]];
    const auto truth = candidate_of(t, batch.s);
    const float* row = S + static_cast<std::int64_t>(i) * n;
    if (home) batch.positive[i] = row[truth - lo];
    const float p = batch.positive[i];
    if (std::isnan(p)) continue; // ranked last whatever the others score
    std::int64_t ge = 0, lt = 0;
    for (std::int64_t c = 0; c < n; ++c) {
      ge += row[c] >= p;
      lt += row[c] < p;
    }
    if (home) --ge; // the truth itself
    const auto filtered = filter_of(known, t, batch.s);
    const auto first = std::lower_bound(filtered.begin(), filtered.end(), lo,
                                        [&](const triple& f, std::int64_t v) { return candidate_of(f, batch.s) < v; });
    for (auto f = first; f != filtered.end() && candidate_of(*f, batch.s) < lo + n; ++f) {
      const auto c = candidate_of(*f, batch.s);
      if (c == truth) continue;
      ge -= row[c - lo] >= p;
      lt -= row[c - lo] < p;
    }
    batch.at_least[i] += ge;
    batch.below[i] += lt;
  }
}

} // namespace

expected<filtered_result> filtered_rank(std::span<const triple> test, const known_triples& known,
                                        const entity_space& space, const score_fn& score,
                                        const filtered_options& options) {
  if (options.batch_size < 1)
    return fail("filtered evaluation: batch_size must be >= 1, got {}", options.batch_size);
  filtered_result result;
  result.lhs_rank.assign(test.size(), 0);
  result.rhs_rank.assign(test.size(), 0);

  // Group by the partition of the true entity (type, partition: the home
  // pass then reads the partitions in order), relation and side (stable),
  // then cut into batches.
  std::map<std::tuple<std::size_t, std::int64_t, std::int64_t, int>, std::vector<std::size_t>> groups;
  for (std::size_t i = 0; i < test.size(); ++i) {
    const auto& t = test[i];
    if (t.rel < 0 || t.rel >= space.num_relations())
      return fail("test edge {} has relation id {}, but there are {} relations", i, t.rel, space.num_relations());
    for (const side s : {side::lhs, side::rhs}) {
      if ((s == side::lhs && !options.rank_lhs) || (s == side::rhs && !options.rank_rhs))
        continue;
      const auto truth = candidate_of(t, s);
      const auto& index = space.of(t.rel, s);
      if (truth < 0 || truth >= index.total())
        return fail("test edge {} refers to entity {} of {}", i, truth, index.total());
      groups[{space.type_of(t.rel, s), index.local(truth).first, t.rel, static_cast<int>(s)}].push_back(i);
    }
  }
  std::vector<ranked_batch> batches;
  const auto batch_size = static_cast<std::size_t>(options.batch_size);
  for (auto& [key, edges] : groups) {
    const auto& [type, home, rel, s] = key;
    for (std::size_t b = 0; b < edges.size(); b += batch_size) {
      auto& batch = batches.emplace_back();
      batch.rel = rel;
      batch.s = static_cast<side>(s);
      batch.type = type;
      batch.home = home;
      batch.edges.assign(edges.begin() + static_cast<std::ptrdiff_t>(b),
                         edges.begin() + static_cast<std::ptrdiff_t>(std::min(edges.size(), b + batch_size)));
      const auto k = batch.edges.size();
      batch.positive.assign(k, 0.f);
      batch.at_least.assign(k, 0);
      batch.below.assign(k, 0);
      batch.removed.assign(k, 1);
      const auto total = space.type(batch.type).total();
      for (std::size_t i = 0; i < k; ++i) {
        const auto& t = test[batch.edges[i]];
        for (const auto& f : filter_of(known, t, batch.s)) {
          const auto c = candidate_of(f, batch.s);
          batch.removed[i] += c != candidate_of(t, batch.s) && c >= 0 && c < total;
        }
      }
    }
  }

  // Candidates one partition at a time, so no more than a partition's rows is
  // scored at once: first each batch's home partition (it sets the positive
  // scores), then every other partition of its type, one after the other, so
  // a model bigger than memory is read partition by partition.
  std::vector<char> states(static_cast<std::size_t>(std::max(options.threads, 1)));
  auto home_pass = [&](char&, std::size_t i) { score_block(batches[i], batches[i].home, test, known, space, score); };
  if (auto ok = detail::run_parallel(batches.size(), states, home_pass); !ok)
    return std::unexpected(ok.error());
  std::set<std::pair<std::size_t, std::int64_t>> blocks;
  for (const auto& b : batches)
    for (std::int64_t part = 0; part < space.type(b.type).num_partitions(); ++part)
      if (part != b.home && space.type(b.type).count(part) > 0)
        blocks.insert({b.type, part});
  for (const auto& [type, part] : blocks) {
    std::vector<std::size_t> here;
    for (std::size_t i = 0; i < batches.size(); ++i)
      if (batches[i].type == type && batches[i].home != part)
        here.push_back(i);
    auto pass = [&](char&, std::size_t j) { score_block(batches[here[j]], part, test, known, space, score); };
    if (auto ok = detail::run_parallel(here.size(), states, pass); !ok)
      return std::unexpected(ok.error());
  }

  for (std::size_t i = 0; i < test.size(); ++i)
    result.stats.add_edges(test[i].rel, 1);
  for (const auto& b : batches) {
    auto& ranks = b.s == side::lhs ? result.lhs_rank : result.rhs_rank;
    const auto total = space.type(b.type).total();
    for (std::size_t i = 0; i < b.edges.size(); ++i) {
      const auto negatives = total - b.removed[i];
      const bool nan = std::isnan(b.positive[i]);
      const auto rank = nan ? 1 + negatives : 1 + b.at_least[i];
      ranks[b.edges[i]] = rank;
      result.stats.add_rank(b.rel, rank);
      if (negatives > 0)
        result.stats.add_auc(b.rel, nan ? 0.0 : static_cast<double>(b.below[i]) / static_cast<double>(negatives),
                             1.0);
    }
  }
  return result;
}

} // namespace abg::eval
