// eval_fraction: which edges of a bucket are held out of training (the same
// ones every epoch), how they are split off, and the pieces the held-out
// evaluation uses (the model's score callback, stopping a sampled ranking).
// LibTorch first: its glog CHECK macro must not replace doctest's.
#include <torch/torch.h>

#include <doctest/doctest.h>

#include <atomic>
#include <set>

#include "abg/eval/model_score.h"
#include "abg/eval/sampled.h"
#include "abg/model/holdout.h"

using namespace abg;

namespace {

train::bucket_edges numbered_edges(std::int64_t n, bool weighted) {
  train::bucket_edges e;
  e.lhs = torch::arange(n, torch::kInt64);
  e.rhs = torch::arange(n, torch::kInt64) + 1000;
  e.rel = torch::arange(n, torch::kInt64) % 3;
  if (weighted)
    e.weight = torch::arange(n, torch::kFloat32) / 2;
  return e;
}

std::vector<std::int64_t> values(const torch::Tensor& t) {
  auto c = t.contiguous();
  return {c.data_ptr<std::int64_t>(), c.data_ptr<std::int64_t>() + c.numel()};
}

} // namespace

TEST_CASE("held out: PBG's count, int(edges * eval_fraction)") {
  CHECK(train::num_held_out(100, 0.05) == 5);
  CHECK(train::num_held_out(99, 0.05) == 4);
  CHECK(train::num_held_out(19, 0.05) == 0);
  CHECK(train::num_held_out(30, 0.1) == 3);
  CHECK(train::num_held_out(7, 0.5) == 3);
  CHECK(train::num_held_out(10, 1.0) == 10);
  CHECK(train::num_held_out(10, 0.0) == 0);
  CHECK(train::num_held_out(0, 0.5) == 0);
  CHECK(train::num_held_out(1'000'000, 0.05) == 50'000);
  CHECK(train::num_held_out(929'541, 0.05) == 46'477);
}

TEST_CASE("held out: the same subset for the same seed, sorted, distinct, of the right size") {
  for (std::int64_t n : {0, 1, 19, 20, 100, 1000, 12345}) {
    for (double f : {0.0, 0.05, 0.1, 0.5, 1.0}) {
      const auto seed = train::held_out_seed(7, 0, 0, 1, 2);
      const auto a = train::held_out_indices(n, f, seed);
      CHECK(a == train::held_out_indices(n, f, seed)); // every epoch: nothing else goes in
      REQUIRE(static_cast<std::int64_t>(a.size()) == train::num_held_out(n, f));
      for (std::size_t i = 0; i < a.size(); ++i) {
        CHECK(a[i] >= 0);
        CHECK(a[i] < n);
        if (i > 0)
          CHECK(a[i - 1] < a[i]);
      }
    }
  }
  // Another bucket, chunk, edge path or run seed holds out other edges.
  const auto base = train::held_out_indices(1000, 0.05, train::held_out_seed(7, 0, 0, 1, 2));
  for (auto seed : {train::held_out_seed(8, 0, 0, 1, 2), train::held_out_seed(7, 1, 0, 1, 2),
                    train::held_out_seed(7, 0, 1, 1, 2), train::held_out_seed(7, 0, 0, 2, 1),
                    train::held_out_seed(7, 0, 0, 1, 3)})
    CHECK(train::held_out_indices(1000, 0.05, seed) != base);
}

TEST_CASE("held out: every edge equally likely") {
  // 4000 subsets of 5 of 20 edges: each edge expected 1000 times (sd ~27).
  std::vector<int> hits(20, 0);
  for (std::uint64_t s = 0; s < 4000; ++s)
    for (auto i : train::held_out_indices(20, 0.25, train::held_out_seed(s, 0, 0, 0, 0)))
      ++hits[static_cast<std::size_t>(i)];
  for (auto h : hits) {
    CHECK(h > 880);
    CHECK(h < 1120);
  }
}

TEST_CASE("held out: split into disjoint train and held-out edges, weights kept") {
  for (bool weighted : {false, true}) {
    const auto edges = numbered_edges(200, weighted);
    const auto held = train::held_out_indices(200, 0.1, 99);
    auto split = train::split_held_out(edges, held);
    REQUIRE(split);
    REQUIRE(split->held_out.size() == 20);
    REQUIRE(split->train.size() == 180);
    // lhs is the edge's index: the held-out edges are exactly `held`, the
    // train edges every other one, in their order.
    CHECK(values(split->held_out.lhs) == held);
    std::vector<std::int64_t> rest;
    const std::set<std::int64_t> held_set(held.begin(), held.end());
    for (std::int64_t i = 0; i < 200; ++i)
      if (!held_set.contains(i))
        rest.push_back(i);
    CHECK(values(split->train.lhs) == rest);
    for (auto* part : {&split->train, &split->held_out}) {
      auto l = values(part->lhs), r = values(part->rhs), t = values(part->rel);
      for (std::size_t i = 0; i < l.size(); ++i) {
        CHECK(r[i] == l[i] + 1000);
        CHECK(t[i] == l[i] % 3);
        if (weighted)
          CHECK(part->weight[static_cast<std::int64_t>(i)].item<float>() == static_cast<float>(l[i]) / 2);
      }
      CHECK(part->weight.defined() == weighted);
    }
  }
  const auto edges = numbered_edges(10, false);
  auto none = train::split_held_out(edges, {});
  REQUIRE(none);
  CHECK(values(none->train.lhs) == values(edges.lhs));
  CHECK(none->held_out.size() == 0);
  const std::vector<std::int64_t> unsorted{3, 1}, repeated{2, 2}, outside{4, 10}, negative{-1};
  CHECK_FALSE(train::split_held_out(edges, unsorted));
  CHECK_FALSE(train::split_held_out(edges, repeated));
  CHECK_FALSE(train::split_held_out(edges, outside));
  CHECK_FALSE(train::split_held_out(edges, negative));
}

TEST_CASE("model_score: the model's scores of anchors against candidates") {
  config cfg;
  cfg.entities.emplace_back("all", entity_schema{.num_partitions = 1});
  cfg.relations.push_back(relation_schema{.name = "r", .lhs = "all", .rhs = "all", .operator_ = "translation"});
  cfg.dimension = 4;
  cfg.comparator = "dot";
  auto m = model::model_desc::from(cfg);
  REQUIRE(m);
  auto params = model::shared_params::init(*m);
  params.values.at("relations.0.rhs.translation").copy_(torch::tensor({1.f, 0.f, -1.f, 0.5f}));
  const auto table = torch::randn({6, 4});
  auto score = eval::model_score(*m, params, eval::rows_of([&](std::int64_t, eval::side) { return table; }));
  torch::NoGradGuard no_grad;
  const auto anchors = torch::tensor({0, 2}, torch::kInt64), candidates = torch::tensor({1, 3, 5}, torch::kInt64);
  const auto t = torch::tensor({1.f, 0.f, -1.f, 0.5f});
  const auto rhs = score(eval::side::rhs, 0, anchors, candidates);
  const auto lhs = score(eval::side::lhs, 0, anchors, candidates);
  REQUIRE(rhs.sizes() == torch::IntArrayRef({2, 3}));
  REQUIRE(lhs.sizes() == torch::IntArrayRef({2, 3}));
  for (std::int64_t i = 0; i < 2; ++i)
    for (std::int64_t j = 0; j < 3; ++j) {
      const auto a = anchors[i].item<std::int64_t>(), c = candidates[j].item<std::int64_t>();
      // rhs replaced: (anchor, r, candidate); lhs replaced: (candidate, r, anchor).
      CHECK(rhs[i][j].item<float>() == doctest::Approx((table[a] * (table[c] + t)).sum().item<float>()));
      CHECK(lhs[i][j].item<float>() == doctest::Approx((table[c] * (table[a] + t)).sum().item<float>()));
    }

  // The positives: each edge's own element-wise product, summed (PBG's
  // (lhs * rhs).sum(-1)), bit for bit, on either side.
  auto pair = eval::model_pair_score(*m, params, eval::rows_of([&](std::int64_t, eval::side) { return table; }));
  const auto truths = torch::tensor({5, 1}, torch::kInt64);
  const auto want = (table.index_select(0, anchors) * (table.index_select(0, truths) + t)).sum(-1);
  CHECK(torch::equal(pair(eval::side::rhs, 0, anchors, truths), want));
  const auto want_lhs = (table.index_select(0, truths) * (table.index_select(0, anchors) + t)).sum(-1);
  CHECK(torch::equal(pair(eval::side::lhs, 0, anchors, truths), want_lhs));
}

TEST_CASE("sampled ranking stops before its next batch once the stop flag is set") {
  std::vector<std::int64_t> lhs(5000), rhs(5000), rel(5000, 0);
  for (std::size_t i = 0; i < lhs.size(); ++i) {
    lhs[i] = static_cast<std::int64_t>(i % 100);
    rhs[i] = static_cast<std::int64_t>((i * 7) % 100);
  }
  std::atomic<bool> stop{false};
  std::atomic<int> calls{0};
  const eval::score_fn score = [&](eval::side, std::int64_t, const at::Tensor& a, const at::Tensor& c) {
    if (++calls == 3)
      stop = true;
    return torch::zeros({a.size(0), c.size(0)});
  };
  eval::sampled_options options{.batch_size = 10, .num_batch_negs = 10, .num_uniform_negs = 5};
  options.stop = &stop;
  auto counts = [](std::int64_t, eval::side) -> std::int64_t { return 100; };
  const eval::pair_score_fn pairs = [](eval::side, std::int64_t, const at::Tensor& a, const at::Tensor&) {
    return torch::zeros({a.size(0)});
  };
  auto r = eval::sampled_rank_bucket({lhs, rhs, rel}, counts, score, pairs, options);
  REQUIRE(r);
  CHECK(r->stopped);
  CHECK(calls.load() == 4); // the batch under way finishes its other side, then nothing
  CHECK(r->stats.overall.count == 20); // two batches of 10 edges

  stop = false;
  calls = -1'000'000;
  auto full = eval::sampled_rank_bucket({lhs, rhs, rel}, counts, score, pairs, options);
  REQUIRE(full);
  CHECK_FALSE(full->stopped);
  CHECK(full->stats.overall.count == 5000);
}
