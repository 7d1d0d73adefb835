// Sampled ranking as PBG's torchbiggraph_eval: chunk negatives, masking, uniform draws.
// LibTorch first: its glog CHECK macro must not replace doctest's.
#include <torch/torch.h>

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <mutex>

#include "abg/eval/sampled.h"

using namespace abg::eval;

TEST_CASE("chunk_negatives: batch negatives, padding and uniform draws, PBG's mask") {
  std::mt19937_64 rng(1);
  const std::vector<std::int64_t> ids{5, 7, 9};
  const auto c = chunk_negatives::make(ids, 4, 2, true, 10, rng);
  REQUIRE(c.candidates.size(0) == 5);
  for (int i = 0; i < 3; ++i)
    CHECK(c.candidates[i].item<std::int64_t>() == ids[static_cast<std::size_t>(i)]);
  for (int j = 3; j < 5; ++j) {
    CHECK(c.candidates[j].item<std::int64_t>() >= 0);
    CHECK(c.candidates[j].item<std::int64_t>() < 10);
  }
  const auto scores = torch::arange(15, torch::kFloat).view({3, 5});
  torch::Tensor neg, mask;
  c.split(scores, neg, mask);
  REQUIRE(neg.sizes() == torch::IntArrayRef({3, 6}));
  CHECK(torch::equal(neg.select(1, 4), scores.select(1, 3)));
  CHECK(torch::equal(neg.select(1, 5), scores.select(1, 4)));
  const auto want = torch::tensor({true, false, false, true, false, false, //
                                   false, true, false, true, false, false, //
                                   false, false, true, true, false, false})
                      .view({3, 6});
  CHECK(torch::equal(mask, want));

  const auto u = chunk_negatives::make(ids, 2, 2, false, 10, rng);
  u.split(torch::arange(15, torch::kFloat).view({3, 5}), neg, mask);
  CHECK(neg.sizes() == torch::IntArrayRef({3, 2}));
  CHECK_FALSE(mask.any().item<bool>());
}

TEST_CASE("sampled ranking: all-tied scores give rank 1 + unmasked negatives, AUC counts masked as beaten; "
          "the positives come from the pair score") {
  std::vector<std::int64_t> lhs(10), rhs(10), rel(10, 0);
  for (int i = 0; i < 10; ++i)
    lhs[static_cast<std::size_t>(i)] = rhs[static_cast<std::size_t>(i)] = i % 6;
  std::mutex mutex;
  std::int64_t max_candidate = 0;
  const score_fn zero = [&](side, std::int64_t, const torch::Tensor& a, const torch::Tensor& c) {
    std::lock_guard lock(mutex);
    max_candidate = std::max(max_candidate, c.max().item<std::int64_t>());
    return torch::zeros({a.size(0), c.size(0)});
  };
  const pair_score_fn zero_pairs = [](side, std::int64_t, const torch::Tensor& a, const torch::Tensor& t) {
    REQUIRE(a.sizes() == t.sizes());
    return torch::zeros({a.size(0)});
  };
  const sampled_options opt{.batch_size = 10, .num_batch_negs = 4, .num_uniform_negs = 3};
  auto counts = [](std::int64_t, side) { return std::int64_t{6}; };
  auto r = sampled_rank_bucket({lhs, rhs, rel}, counts, zero, zero_pairs, opt);
  REQUIRE(r.has_value());
  // Chunks of 4, 4, 2 edges: 3 other batch negatives (2 in the last, padded chunk) + 3 uniform ones.
  const std::vector<std::int64_t> want{7, 7, 7, 7, 7, 7, 7, 7, 5, 5};
  CHECK(r->lhs_rank == want);
  CHECK(r->rhs_rank == want);
  CHECK(max_candidate < 6);
  CHECK(r->stats.overall.count == 10);
  // Each positive beats only the 14 masked entries (4 + 4 + 2 diagonal, 2 x 2 padding) of the 70.
  CHECK(r->stats.overall.auc() == doctest::Approx(10.0 * 14 / 700));

  // A positive scored a rounding error above its negatives (as PBG's separate
  // product can score it above the same entity met as a chunk mate) beats
  // them all; one a rounding error below ties with none and loses to all.
  const auto tiny = std::nextafter(0.0f, 1.0f);
  for (const float p : {tiny, -tiny}) {
    const pair_score_fn pairs = [p](side, std::int64_t, const torch::Tensor& a, const torch::Tensor&) {
      return torch::full({a.size(0)}, p);
    };
    auto q = sampled_rank_bucket({lhs, rhs, rel}, counts, zero, pairs, opt);
    REQUIRE(q.has_value());
    const std::vector<std::int64_t> ones(10, 1);
    CHECK((q->lhs_rank == (p > 0 ? ones : want)));
    CHECK((q->rhs_rank == (p > 0 ? ones : want)));
  }
  const pair_score_fn bad = [](side, std::int64_t, const torch::Tensor& a, const torch::Tensor&) {
    return torch::zeros({a.size(0), 2});
  };
  auto e = sampled_rank_bucket({lhs, rhs, rel}, counts, zero, bad, opt);
  REQUIRE_FALSE(e.has_value());
  CHECK(e.error().message.find("pair score function returned shape") != std::string::npos);
}

TEST_CASE("sampled ranking with batch negatives only equals brute force in PBG's order, for any thread count") {
  const std::int64_t n = 23;
  std::vector<std::int64_t> lhs, rhs, rel;
  for (std::int64_t i = 0; i < n; ++i) {
    lhs.push_back((i * 7) % 11);
    rhs.push_back((i * 5 + 3) % 13);
    rel.push_back(i % 2);
  }
  // score(l, r, rr) = -|l + r - rr|, integer valued: ties happen.
  const score_fn f = [](side s, std::int64_t r, const torch::Tensor& a, const torch::Tensor& c) {
    const auto av = a.to(torch::kFloat).unsqueeze(1), cv = c.to(torch::kFloat).unsqueeze(0);
    return s == side::rhs ? -(av + static_cast<float>(r) - cv).abs() : -(cv + static_cast<float>(r) - av).abs();
  };
  const pair_score_fn pairs = [](side s, std::int64_t r, const torch::Tensor& a, const torch::Tensor& t) {
    const auto av = a.to(torch::kFloat), tv = t.to(torch::kFloat);
    return s == side::rhs ? -(av + static_cast<float>(r) - tv).abs() : -(tv + static_cast<float>(r) - av).abs();
  };
  auto score_of = [](std::int64_t l, std::int64_t r, std::int64_t rr) {
    return -std::abs(static_cast<float>(l + r - rr));
  };
  const std::int64_t chunk = 4, batch = 8;
  // PBG's order: two slices (its two workers), each sorted by relation id
  // with LibTorch's unstable sort, then batches of one relation.
  const std::size_t slices = 2;
  std::vector<std::vector<std::size_t>> batches;
  for (std::size_t s = 0, first = 0; s < slices; ++s) {
    const auto size = static_cast<std::size_t>(n) / slices + (s < static_cast<std::size_t>(n) % slices ? 1 : 0);
    const auto order =
        std::get<1>(torch::tensor(std::vector<std::int64_t>(rel.begin() + static_cast<std::ptrdiff_t>(first),
                                                            rel.begin() + static_cast<std::ptrdiff_t>(first + size)))
                        .sort());
    for (std::int64_t r = 0; r < 2; ++r) {
      std::vector<std::size_t> idx;
      for (std::int64_t k = 0; k < order.size(0); ++k) {
        const auto e = first + static_cast<std::size_t>(order[k].item<std::int64_t>());
        if (rel[e] == r)
          idx.push_back(e);
      }
      for (std::size_t b0 = 0; b0 < idx.size(); b0 += batch)
        batches.emplace_back(idx.begin() + static_cast<std::ptrdiff_t>(b0),
                             idx.begin() + static_cast<std::ptrdiff_t>(std::min(idx.size(), b0 + batch)));
    }
    first += size;
  }
  std::vector<std::int64_t> want_lhs(static_cast<std::size_t>(n)), want_rhs(static_cast<std::size_t>(n));
  for (const auto& idx : batches) {
    for (std::size_t c0 = 0; c0 < idx.size(); c0 += chunk) {
      const auto c1 = std::min(idx.size(), c0 + chunk);
      for (auto i = c0; i < c1; ++i) {
        const auto e = idx[i];
        const auto r = rel[e];
        const float p = score_of(lhs[e], r, rhs[e]);
        std::int64_t rl = 1, rr = 1;
        for (auto j = c0; j < c1; ++j) {
          if (j == i)
            continue;
          rr += score_of(lhs[e], r, rhs[idx[j]]) >= p;
          rl += score_of(lhs[idx[j]], r, rhs[e]) >= p;
        }
        want_lhs[e] = rl;
        want_rhs[e] = rr;
      }
    }
  }
  for (int threads : {1, 2}) {
    const sampled_options opt{
        .batch_size = batch, .num_batch_negs = chunk, .num_uniform_negs = 0, .threads = threads, .slices = 2};
    auto got = sampled_rank_bucket({lhs, rhs, rel}, [](std::int64_t, side) { return std::int64_t{13}; }, f, pairs, opt);
    REQUIRE(got.has_value());
    CHECK(got->lhs_rank == want_lhs);
    CHECK(got->rhs_rank == want_rhs);
    CHECK(got->stats.per_relation.size() == 2);
  }

  SUBCASE("all_negs ranks against the whole partition, the true entity masked") {
    sampled_options opt{.batch_size = batch, .all_negs = {true, true}};
    auto got = sampled_rank_bucket({lhs, rhs, rel}, [](std::int64_t, side) { return std::int64_t{13}; }, f, pairs, opt);
    REQUIRE(got.has_value());
    for (std::size_t e = 0; e < static_cast<std::size_t>(n); ++e) {
      const float p = score_of(lhs[e], rel[e], rhs[e]);
      std::int64_t rl = 1, rr = 1;
      for (std::int64_t c = 0; c < 13; ++c) {
        rr += c != rhs[e] && score_of(lhs[e], rel[e], c) >= p;
        rl += c != lhs[e] && score_of(c, rel[e], rhs[e]) >= p;
      }
      CHECK(got->lhs_rank[e] == rl);
      CHECK(got->rhs_rank[e] == rr);
    }
  }
}

TEST_CASE("sampled ranking: uniform draws are reproducible from the seed, whatever the thread count") {
  std::vector<std::int64_t> lhs(50), rhs(50), rel(50, 0);
  for (std::size_t i = 0; i < 50; ++i) {
    lhs[i] = static_cast<std::int64_t>(i % 17);
    rhs[i] = static_cast<std::int64_t>((i * 3) % 17);
  }
  const score_fn f = [](side, std::int64_t, const torch::Tensor& a, const torch::Tensor& c) {
    return (a.to(torch::kFloat).unsqueeze(1) * 0.37f + c.to(torch::kFloat).unsqueeze(0)).sin();
  };
  const pair_score_fn pairs = [](side, std::int64_t, const torch::Tensor& a, const torch::Tensor& t) {
    return (a.to(torch::kFloat) * 0.37f + t.to(torch::kFloat)).sin();
  };
  auto run = [&](int threads) {
    const sampled_options opt{.batch_size = 10, .num_batch_negs = 5, .num_uniform_negs = 7, .threads = threads, .seed = 42};
    return sampled_rank_bucket({lhs, rhs, rel}, [](std::int64_t, side) { return std::int64_t{17}; }, f, pairs, opt);
  };
  auto a = run(1), b = run(2);
  REQUIRE(a.has_value());
  REQUIRE(b.has_value());
  CHECK(a->lhs_rank == b->lhs_rank);
  CHECK(a->rhs_rank == b->rhs_rank);
  CHECK(a->stats.overall.auc() == doctest::Approx(b->stats.overall.auc()));
}

TEST_CASE("bucket_partition_counts: the bucket's partition, partition 0 for unpartitioned types") {
  const entity_space space({entity_index({3, 4}), entity_index({5})}, {{0, 0}, {0, 1}});
  const auto counts = bucket_partition_counts(space, 1, 0);
  CHECK(counts(0, side::lhs) == 4);
  CHECK(counts(0, side::rhs) == 3);
  CHECK(counts(1, side::lhs) == 4);
  CHECK(counts(1, side::rhs) == 5);
}
