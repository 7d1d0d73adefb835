// Metrics of abg eval on hand-made ranks, and the rank/AUC of score matrices.
// LibTorch first: its glog CHECK macro must not replace doctest's.
#include <torch/torch.h>

#include <doctest/doctest.h>

#include <cmath>
#include <random>

#include "abg/eval/metrics.h"
#include "abg/eval/ranking.h"

using namespace abg::eval;

TEST_CASE("eval metrics: MRR, mean rank, Hits@k, AUC and count from hand-made ranks") {
  metrics m;
  for (std::int64_t r : {1, 2, 10, 11, 50, 51})
    m.add_rank(r);
  m.add_edges(3);
  m.add_auc(0.5, 2);
  m.add_auc(1.0, 1);
  m.add_auc(std::nan(""), 5); // ignored
  CHECK(m.mrr() == doctest::Approx((1 + 0.5 + 0.1 + 1.0 / 11 + 0.02 + 1.0 / 51) / 6));
  CHECK(m.mean_rank() == doctest::Approx(125.0 / 6));
  CHECK(m.hits_at_1() == doctest::Approx(1.0 / 6));
  CHECK(m.hits_at_3() == doctest::Approx(2.0 / 6));
  CHECK(m.hits_at_10() == doctest::Approx(3.0 / 6));
  CHECK(m.hits_at_50() == doctest::Approx(5.0 / 6));
  CHECK(m.auc() == doctest::Approx(2.0 / 3));
  CHECK(m.count == 3);

  SUBCASE("merging per-thread sums gives the same metrics") {
    metrics a, b;
    a.add_rank(1);
    a.add_rank(2);
    a.add_rank(10);
    a.add_edges(1);
    a.add_auc(0.5, 2);
    b.add_rank(11);
    b.add_rank(50);
    b.add_rank(51);
    b.add_edges(2);
    b.add_auc(1.0, 1);
    a.merge(b);
    CHECK(a.mrr() == doctest::Approx(m.mrr()));
    CHECK(a.mean_rank() == doctest::Approx(m.mean_rank()));
    CHECK(a.hits1 == m.hits1);
    CHECK(a.hits3 == m.hits3);
    CHECK(a.hits10 == m.hits10);
    CHECK(a.hits50 == m.hits50);
    CHECK(a.auc() == doctest::Approx(m.auc()));
    CHECK(a.count == m.count);
    CHECK(a.ranked == m.ranked);
  }

  SUBCASE("JSON has exactly the documented keys") {
    const auto j = m.to_json();
    CHECK(j.size() == 8);
    for (const char* key : {"mrr", "mean_rank", "hits@1", "hits@3", "hits@10", "hits@50", "auc", "count"})
      CHECK(j.contains(key));
    CHECK(j["count"].get<std::uint64_t>() == 3);
    CHECK(j["hits@10"].get<double>() == doctest::Approx(0.5));
    CHECK(metrics{}.to_json()["mrr"].is_null());
  }
}

TEST_CASE("eval metrics: per relation, merged, named in JSON") {
  eval_stats a, b;
  a.add_edges(0, 1);
  a.add_rank(0, 1);
  a.add_rank(0, 3);
  b.add_edges(1, 1);
  b.add_rank(1, 2);
  b.add_rank(1, 2);
  b.add_edges(7, 1);
  b.add_rank(7, 1);
  a.merge(b);
  CHECK(a.overall.count == 3);
  CHECK(a.overall.ranked == 5);
  CHECK(a.per_relation.at(0).mrr() == doctest::Approx((1 + 1.0 / 3) / 2));
  CHECK(a.per_relation.at(1).mean_rank() == doctest::Approx(2));
  const auto j = a.to_json(true, {"likes", "hates"});
  CHECK(j.size() == 9); // 8 metrics and per_relation
  CHECK(j["per_relation"].size() == 3);
  CHECK(j["per_relation"]["likes"]["count"] == 1);
  CHECK(j["per_relation"]["hates"]["mean_rank"].get<double>() == doctest::Approx(2));
  CHECK(j["per_relation"]["7"]["mrr"].get<double>() == doctest::Approx(1));
  CHECK_FALSE(a.to_json(false).contains("per_relation"));
}

TEST_CASE("rank_from_scores: ties count against the positive, masked entries are no negatives") {
  const auto pos = torch::tensor({2.0f, 1.0f});
  const auto neg = torch::tensor({3.0f, 2.0f, 1.0f, 1.0f, 0.0f, 5.0f}).view({2, 3});
  auto r = rank_from_scores(pos, neg);
  CHECK(r.ranks == std::vector<std::int64_t>{3, 3});
  // AUC over all 2 x 6 (positive, negative) pairs of the batch: 2 beats {1, 1, 0}, 1 beats {0}.
  CHECK(r.auc == doctest::Approx(4.0 / 12));

  const auto mask = torch::tensor({false, true, false, true, false, false}).view({2, 3});
  r = rank_from_scores(pos, neg, mask);
  CHECK(r.ranks == std::vector<std::int64_t>{2, 2});
  // Masked negatives count as beaten (PBG sets them to -1e9): 2 beats {1, 0} + 2, 1 beats {0} + 2.
  CHECK(r.auc == doctest::Approx(7.0 / 12));

  CHECK(std::isnan(rank_from_scores(pos, torch::zeros({2, 0})).auc));
}

TEST_CASE("rank_from_scores: AUC equals the brute-force pair fraction") {
  std::mt19937 rng(3);
  std::uniform_int_distribution<int> v(0, 6); // coarse values: many ties
  const int n = 7, k = 5;
  auto pos = torch::empty({n});
  auto neg = torch::empty({n, k});
  auto mask = torch::zeros({n, k}, torch::kBool);
  for (int i = 0; i < n; ++i) {
    pos[i] = static_cast<float>(v(rng));
    for (int j = 0; j < k; ++j) {
      neg[i][j] = static_cast<float>(v(rng));
      mask[i][j] = v(rng) == 0;
    }
  }
  const auto r = rank_from_scores(pos, neg, mask);
  double wins = 0;
  for (int i = 0; i < n; ++i) {
    std::int64_t ge = 0;
    for (int j = 0; j < k; ++j)
      if (!mask[i][j].item<bool>())
        ge += neg[i][j].item<float>() >= pos[i].item<float>();
    CHECK(r.ranks[static_cast<std::size_t>(i)] == 1 + ge);
    for (int a = 0; a < n; ++a)
      for (int j = 0; j < k; ++j)
        wins += mask[a][j].item<bool>() || pos[i].item<float>() > neg[a][j].item<float>();
  }
  CHECK(r.auc == doctest::Approx(wins / (n * n * k)));
}

TEST_CASE("entity_index: global numbering is the prefix sum of partition counts") {
  const entity_index idx({3, 0, 4});
  CHECK(idx.total() == 7);
  CHECK(idx.num_partitions() == 3);
  CHECK(idx.global(0, 2) == 2);
  CHECK(idx.global(2, 1) == 4);
  for (std::int64_t g = 0; g < idx.total(); ++g) {
    const auto [p, o] = idx.local(g);
    CHECK(idx.count(p) > o);
    CHECK(idx.global(p, o) == g);
  }
  CHECK(idx.local(3) == std::pair<std::int64_t, std::int64_t>{2, 0});
}
