#include "abg/eval/sampled.h"

#include <algorithm>

#include <fmt/ranges.h>
#include <torch/torch.h>

#include "runtime/eval/parallel.h"

namespace abg::eval {
namespace {

struct work_item {
  std::int64_t rel = 0;
  std::vector<std::size_t> edges;
};

std::uint64_t mix(std::uint64_t x) { // splitmix64 finaliser
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

void check_shape(const torch::Tensor& scores, std::int64_t rows, std::int64_t cols) {
  if (scores.dim() != 2 || scores.size(0) != rows || scores.size(1) != cols)
    throw std::runtime_error(fmt::format("the score function returned shape {} for {} edges and {} candidates",
                                         fmt::join(scores.sizes(), "x"), rows, cols));
}

} // namespace

bucket_columns read_bucket_columns(const storage::bucket_reader& bucket) {
  bucket_columns c;
  const auto n = bucket.size();
  c.lhs.resize(n);
  c.rhs.resize(n);
  c.rel.resize(n);
  for (std::uint64_t i = 0; i < n; ++i) {
    c.lhs[i] = static_cast<std::int64_t>(bucket.lhs(i));
    c.rhs[i] = static_cast<std::int64_t>(bucket.rhs(i));
    c.rel[i] = static_cast<std::int64_t>(bucket.rel(i));
  }
  return c;
}

std::function<std::int64_t(std::int64_t rel, side)> bucket_partition_counts(const entity_space& space,
                                                                            std::int64_t lhs_partition,
                                                                            std::int64_t rhs_partition) {
  return [&space, lhs_partition, rhs_partition](std::int64_t rel, side s) {
    const auto& idx = space.of(rel, s);
    if (idx.num_partitions() == 1)
      return idx.count(0);
    return idx.count(s == side::lhs ? lhs_partition : rhs_partition);
  };
}

chunk_negatives chunk_negatives::make(std::span<const std::int64_t> true_ids, std::int64_t chunk_size,
                                      std::int64_t num_uniform, bool batch_negs, std::int64_t partition_count,
                                      std::mt19937_64& rng) {
  chunk_negatives c;
  c.n = static_cast<std::int64_t>(true_ids.size());
  c.chunk_size = std::max(chunk_size, c.n);
  c.num_uniform = partition_count > 0 ? num_uniform : 0;
  c.batch_negs = batch_negs;
  c.candidates = torch::empty({c.n + c.num_uniform}, torch::kLong);
  auto* out = c.candidates.data_ptr<std::int64_t>();
  std::copy(true_ids.begin(), true_ids.end(), out);
  if (c.num_uniform > 0) {
    std::uniform_int_distribution<std::int64_t> draw(0, partition_count - 1);
    for (std::int64_t j = 0; j < c.num_uniform; ++j)
      out[c.n + j] = draw(rng);
  }
  return c;
}

void chunk_negatives::split(const torch::Tensor& scores_in, torch::Tensor& neg, torch::Tensor& mask) const {
  check_shape(scores_in, n, n + num_uniform);
  const auto scores = scores_in.to(torch::kFloat);
  if (!batch_negs) {
    neg = scores.narrow(1, n, num_uniform).contiguous();
    mask = torch::zeros({n, num_uniform}, torch::kBool);
    return;
  }
  const auto padding = chunk_size - n;
  // PBG pads the last chunk with zero embeddings and masks their scores.
  neg = torch::cat({scores.narrow(1, 0, n), torch::zeros({n, padding}, torch::kFloat), scores.narrow(1, n, num_uniform)},
                   1)
            .contiguous();
  mask = torch::zeros({n, chunk_size + num_uniform}, torch::kBool);
  auto m = mask.accessor<bool, 2>();
  for (std::int64_t i = 0; i < n; ++i) {
    m[i][i] = true;
    for (std::int64_t j = n; j < chunk_size; ++j)
      m[i][j] = true;
  }
}

expected<sampled_result> sampled_rank_bucket(const bucket_edges& edges,
                                             const std::function<std::int64_t(std::int64_t rel, side)>& partition_count,
                                             const score_fn& score, const pair_score_fn& pair_score,
                                             const sampled_options& options) {
  const auto num_edges = edges.lhs.size();
  if (edges.rhs.size() != num_edges || edges.rel.size() != num_edges)
    return fail("sampled evaluation: lhs, rhs and rel columns differ in length");
  if (options.batch_size < 1 || options.num_batch_negs < 0 || options.num_uniform_negs < 0)
    return fail("sampled evaluation: batch_size must be >= 1 and the negative counts >= 0");
  if (options.num_batch_negs == 0 && options.num_uniform_negs == 0)
    return fail("sampled evaluation: no negatives (num_batch_negs = num_uniform_negs = 0)");

  sampled_result result;
  result.lhs_rank.assign(num_edges, 0);
  result.rhs_rank.assign(num_edges, 0);

  // Batches in PBG's order: per slice (PBG's split_almost_equally over its
  // workers), the edges sorted by relation id with LibTorch's default,
  // unstable sort, exactly as PBG's group_by_relation_type does; the same
  // LibTorch gives the same permutation. Within one relation this reorders
  // the edges in runs, and the chunks (hence the batch negatives) follow.
  std::vector<work_item> items;
  const auto batch = static_cast<std::size_t>(options.batch_size);
  const auto slices = static_cast<std::size_t>(std::max(options.slices, 1));
  std::vector<std::int64_t> rel_column(edges.rel.begin(), edges.rel.end());
  std::size_t first = 0;
  for (std::size_t s = 0; s < slices; ++s) {
    const auto size = num_edges / slices + (s < num_edges % slices ? 1 : 0);
    if (size == 0)
      continue;
    const auto column = torch::from_blob(rel_column.data() + first, {static_cast<std::int64_t>(size)}, torch::kLong);
    const auto order = std::get<1>(column.sort()).contiguous();
    const auto* o = order.data_ptr<std::int64_t>();
    for (std::size_t g = 0; g < size;) { // one run of equal relation ids, cut into batches
      const auto rel = edges.rel[first + static_cast<std::size_t>(o[g])];
      std::size_t end = g;
      while (end < size && edges.rel[first + static_cast<std::size_t>(o[end])] == rel)
        ++end;
      for (std::size_t b = g; b < end; b += batch) {
        work_item item{rel, {}};
        for (auto i = b; i < std::min(end, b + batch); ++i)
          item.edges.push_back(first + static_cast<std::size_t>(o[i]));
        items.push_back(std::move(item));
      }
      g = end;
    }
    first += size;
  }

  std::vector<eval_stats> states(static_cast<std::size_t>(std::max(options.threads, 1)));
  auto work = [&](eval_stats& stats, std::size_t item_index) {
    if (options.stop != nullptr && options.stop->load(std::memory_order_relaxed))
      return;
    const auto& item = items[item_index];
    const auto b = static_cast<std::int64_t>(item.edges.size());
    const bool all_negs = static_cast<std::size_t>(item.rel) < options.all_negs.size() &&
                          options.all_negs[static_cast<std::size_t>(item.rel)];
    std::mt19937_64 rng(mix(options.seed ^ mix(item_index)));
    stats.add_edges(item.rel, static_cast<std::uint64_t>(b));
    double loss = 0;
    for (const side s : {side::lhs, side::rhs}) {
      if ((s == side::lhs && !options.rank_lhs) || (s == side::rhs && !options.rank_rhs))
        continue;
      std::vector<std::int64_t> anchor_ids(static_cast<std::size_t>(b)), true_ids(static_cast<std::size_t>(b));
      for (std::size_t i = 0; i < item.edges.size(); ++i) {
        const auto e = item.edges[i];
        anchor_ids[i] = s == side::lhs ? edges.rhs[e] : edges.lhs[e];
        true_ids[i] = s == side::lhs ? edges.lhs[e] : edges.rhs[e];
      }
      const auto count = partition_count(item.rel, s);
      // The positives on their own rows, as PBG scores them: where a negative
      // is the true entity (a chunk mate sharing it), the two scores differ
      // only by rounding, so such ties go either way, as in PBG.
      const auto anchors = torch::tensor(anchor_ids, torch::kLong);
      const auto truth = torch::tensor(true_ids, torch::kLong);
      auto pos = pair_score(s, item.rel, anchors, truth);
      if (pos.dim() != 1 || pos.size(0) != b)
        throw std::runtime_error(fmt::format("the pair score function returned shape {} for {} edges",
                                             fmt::join(pos.sizes(), "x"), b));
      pos = pos.to(torch::kFloat).contiguous();
      torch::Tensor neg, mask;
      if (all_negs) {
        auto scores = score(s, item.rel, anchors, torch::arange(count, torch::kLong));
        check_shape(scores, b, count);
        neg = scores.to(torch::kFloat);
        mask = torch::zeros({b, count}, torch::kBool);
        mask.scatter_(1, truth.unsqueeze(1), true);
      } else {
        const bool batch_negs = options.num_batch_negs > 0;
        const auto chunk = batch_negs ? options.num_batch_negs : options.num_uniform_negs;
        std::vector<torch::Tensor> neg_parts, mask_parts;
        for (std::int64_t c0 = 0; c0 < b; c0 += chunk) {
          const auto n = std::min(chunk, b - c0);
          const std::span<const std::int64_t> ids(true_ids.data() + c0, static_cast<std::size_t>(n));
          auto negs = chunk_negatives::make(ids, chunk, options.num_uniform_negs, batch_negs, count, rng);
          torch::Tensor q, m;
          negs.split(score(s, item.rel, anchors.narrow(0, c0, n), negs.candidates), q, m);
          neg_parts.push_back(q);
          mask_parts.push_back(m);
        }
        neg = torch::cat(neg_parts);
        mask = torch::cat(mask_parts);
      }
      const auto ranked = rank_from_scores(pos, neg, mask);
      auto& ranks = s == side::lhs ? result.lhs_rank : result.rhs_rank;
      for (std::size_t i = 0; i < item.edges.size(); ++i) {
        ranks[item.edges[i]] = ranked.ranks[i];
        stats.add_rank(item.rel, ranked.ranks[i]);
      }
      stats.add_auc(item.rel, ranked.auc, static_cast<double>(b));
      if (options.loss)
        loss += options.loss(item.rel, pos, neg.masked_fill(mask, -1e9));
    }
    if (options.loss)
      stats.add_loss(item.rel, loss, static_cast<std::uint64_t>(b));
  };
  if (auto ok = detail::run_parallel(items.size(), states, work); !ok)
    return std::unexpected(ok.error());
  for (const auto& st : states)
    result.stats.merge(st);
  result.stopped = options.stop != nullptr && options.stop->load();
  return result;
}

} // namespace abg::eval
