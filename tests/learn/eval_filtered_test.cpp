// Filtered full ranking against a brute-force reference on a tiny graph.
// LibTorch first: its glog CHECK macro must not replace doctest's.
#include <torch/torch.h>

#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <optional>
#include <tuple>
#include <random>
#include <set>
#include <stdexcept>

#include "abg/eval/filtered.h"
#include "abg/eval/model_score.h"
#include "abg/storage/edge_manifest.h"
#include "tests/test_util.h"

using namespace abg::eval;

namespace {

// Two types: A with partitions {3, 4} (7 entities), B with one partition of 5.
// Relation 0: A -> A, relation 1: A -> B.
entity_space tiny_space() { return entity_space({entity_index({3, 4}), entity_index({5})}, {{0, 0}, {0, 1}}); }

// A fixed random integer score table per relation: many ties.
struct table_scorer {
  std::vector<std::vector<std::vector<float>>> m; // [rel][lhs][rhs]
  explicit table_scorer(const entity_space& space, unsigned seed) {
    std::mt19937 rng(seed);
    std::uniform_int_distribution<int> v(0, 3);
    for (std::int64_t r = 0; r < space.num_relations(); ++r) {
      auto& t = m.emplace_back();
      for (std::int64_t a = 0; a < space.of(r, side::lhs).total(); ++a) {
        auto& row = t.emplace_back();
        for (std::int64_t b = 0; b < space.of(r, side::rhs).total(); ++b)
          row.push_back(static_cast<float>(v(rng)));
      }
    }
  }
  float operator()(std::int64_t l, std::int64_t r, std::int64_t rr) const {
    return m[static_cast<std::size_t>(r)][static_cast<std::size_t>(l)][static_cast<std::size_t>(rr)];
  }
  score_fn fn() const {
    return [this](side s, std::int64_t rel, const torch::Tensor& anchors, const torch::Tensor& candidates) {
      auto out = torch::empty({anchors.size(0), candidates.size(0)});
      auto o = out.accessor<float, 2>();
      for (std::int64_t i = 0; i < anchors.size(0); ++i)
        for (std::int64_t j = 0; j < candidates.size(0); ++j) {
          const auto a = anchors[i].item<std::int64_t>(), c = candidates[j].item<std::int64_t>();
          o[i][j] = s == side::rhs ? (*this)(a, rel, c) : (*this)(c, rel, a);
        }
      return out;
    };
  }
};

struct brute_ranks {
  std::vector<std::int64_t> lhs, rhs;
  double auc_sum = 0;
  int auc_n = 0;
};

brute_ranks brute_force(const std::vector<triple>& test, const std::set<std::tuple<std::int64_t, std::int64_t, std::int64_t>>& known,
                        const entity_space& space, const table_scorer& sc) {
  brute_ranks out;
  for (const auto& t : test) {
    const float p = sc(t.lhs, t.rel, t.rhs);
    std::int64_t rank = 1, below = 0, negs = 0;
    for (std::int64_t c = 0; c < space.of(t.rel, side::rhs).total(); ++c) {
      if (c == t.rhs || known.contains({t.lhs, t.rel, c}))
        continue;
      ++negs;
      rank += sc(t.lhs, t.rel, c) >= p;
      below += sc(t.lhs, t.rel, c) < p;
    }
    out.rhs.push_back(rank);
    if (negs > 0) {
      out.auc_sum += static_cast<double>(below) / static_cast<double>(negs);
      ++out.auc_n;
    }
    rank = 1;
    below = 0;
    negs = 0;
    for (std::int64_t c = 0; c < space.of(t.rel, side::lhs).total(); ++c) {
      if (c == t.lhs || known.contains({c, t.rel, t.rhs}))
        continue;
      ++negs;
      rank += sc(c, t.rel, t.rhs) >= p;
      below += sc(c, t.rel, t.rhs) < p;
    }
    out.lhs.push_back(rank);
    if (negs > 0) {
      out.auc_sum += static_cast<double>(below) / static_cast<double>(negs);
      ++out.auc_n;
    }
  }
  return out;
}

} // namespace

TEST_CASE("known_triples: lookups by (rel, lhs) and (rel, rhs), de-duplicated") {
  const known_triples k({{1, 0, 2}, {1, 0, 3}, {1, 0, 2}, {2, 0, 3}, {1, 1, 2}});
  CHECK(k.size() == 4);
  CHECK(k.contains({1, 0, 3}));
  CHECK_FALSE(k.contains({3, 0, 1}));
  const auto r = k.with_lhs(0, 1);
  REQUIRE(r.size() == 2);
  CHECK(r[0].rhs == 2);
  CHECK(r[1].rhs == 3);
  const auto l = k.with_rhs(0, 3);
  REQUIRE(l.size() == 2);
  CHECK(l[0].lhs == 1);
  CHECK(l[1].lhs == 2);
  CHECK(k.with_lhs(1, 1).size() == 1);
  CHECK(k.with_rhs(1, 3).empty());
}

TEST_CASE("filtered ranking equals brute force for every batch size and thread count") {
  const auto space = tiny_space();
  const table_scorer sc(space, 11);
  std::mt19937 rng(5);
  std::set<std::tuple<std::int64_t, std::int64_t, std::int64_t>> known_set;
  std::vector<triple> all;
  for (int i = 0; i < 40; ++i) {
    const std::int64_t rel = i % 2;
    const triple t{static_cast<std::int64_t>(rng() % 7), rel, static_cast<std::int64_t>(rng() % (rel == 0 ? 7 : 5))};
    if (known_set.insert({t.lhs, t.rel, t.rhs}).second)
      all.push_back(t);
  }
  // Test edges: the first 12 known triples, plus one edge that is not known.
  std::vector<triple> test(all.begin(), all.begin() + 12);
  triple unknown{0, 1, 0};
  while (known_set.contains({unknown.lhs, unknown.rel, unknown.rhs}))
    ++unknown.rhs;
  test.push_back(unknown);
  const known_triples known(all);
  const auto expected_ranks = brute_force(test, known_set, space, sc);
  // The filter matters here: unfiltered ranks would be larger somewhere.
  const auto unfiltered = brute_force(test, {}, space, sc);
  CHECK((unfiltered.lhs != expected_ranks.lhs || unfiltered.rhs != expected_ranks.rhs));

  // Each call scores the candidates of exactly one partition of the side's
  // type: what keeps a model bigger than memory evaluable.
  std::atomic<int> calls{0}, not_one_partition{0};
  const auto inner = sc.fn();
  const score_fn one_partition = [&](side s, std::int64_t rel, const torch::Tensor& a, const torch::Tensor& c) {
    ++calls;
    const auto& index = space.of(rel, s);
    const auto lo = c[0].item<std::int64_t>();
    const auto [part, offset] = index.local(lo);
    if (offset != 0 || c.size(0) != index.count(part) || !torch::equal(c, torch::arange(lo, lo + c.size(0))))
      ++not_one_partition;
    return inner(s, rel, a, c);
  };
  std::optional<filtered_result> first;
  for (std::int64_t batch : {1, 2, 3, 5, 1000})
    for (int threads : {1, 2}) {
      CAPTURE(batch);
      CAPTURE(threads);
      auto r = filtered_rank(test, known, space, one_partition, {.batch_size = batch, .threads = threads});
      REQUIRE(r.has_value());
      CHECK(r->lhs_rank == expected_ranks.lhs);
      CHECK(r->rhs_rank == expected_ranks.rhs);
      CHECK(r->stats.overall.count == test.size());
      CHECK(r->stats.overall.ranked == 2 * test.size());
      CHECK(r->stats.overall.auc() == doctest::Approx(expected_ranks.auc_sum / expected_ranks.auc_n));
      double rr = 0;
      for (std::size_t i = 0; i < test.size(); ++i)
        rr += 1.0 / static_cast<double>(expected_ranks.lhs[i]) + 1.0 / static_cast<double>(expected_ranks.rhs[i]);
      CHECK(r->stats.overall.mrr() == doctest::Approx(rr / (2.0 * static_cast<double>(test.size()))));
      if (!first)
        first = std::move(*r);
      else
        CHECK(r->stats.overall.mean_rank() == doctest::Approx(first->stats.overall.mean_rank()));
    }
  CHECK(first->stats.per_relation.size() == 2);
  CHECK(calls > 0);
  CHECK(not_one_partition == 0);
}

TEST_CASE("filtered ranking: with all scores tied, rank = 1 + candidates that are not true") {
  const auto space = tiny_space();
  const known_triples known({{0, 1, 1}, {0, 1, 3}, {0, 1, 4}, {2, 1, 4}, {0, 0, 4}});
  const score_fn zero = [](side, std::int64_t, const torch::Tensor& a, const torch::Tensor& c) {
    return torch::zeros({a.size(0), c.size(0)});
  };
  const std::vector<triple> test{{0, 1, 4}};
  auto r = filtered_rank(test, known, space, zero, {});
  REQUIRE(r.has_value());
  // rhs: 5 entities of B, minus the true 4 and the other known 1, 3: 2 tied negatives.
  CHECK(r->rhs_rank[0] == 3);
  // lhs: 7 entities of A, minus the true 0 and the other known 2 (relation 0's (0, 0, 4) is no filter).
  CHECK(r->lhs_rank[0] == 6);
  CHECK(r->stats.overall.auc() == doctest::Approx(0));

  auto only_rhs = filtered_rank(test, known, space, zero, {.rank_lhs = false});
  REQUIRE(only_rhs.has_value());
  CHECK(only_rhs->lhs_rank[0] == 0);
  CHECK(only_rhs->stats.overall.ranked == 1);
}

TEST_CASE("filtered ranking: scorer errors and wrong shapes come back as errors") {
  const auto space = tiny_space();
  const std::vector<triple> test{{0, 0, 1}, {1, 0, 2}};
  const score_fn bad = [](side, std::int64_t, const torch::Tensor& a, const torch::Tensor&) {
    return torch::zeros({a.size(0), 1});
  };
  auto r = filtered_rank(test, known_triples{}, space, bad, {.threads = 2});
  REQUIRE_FALSE(r.has_value());
  CHECK(r.error().message.find("shape") != std::string::npos);
  const score_fn throws = [](side, std::int64_t, const torch::Tensor&, const torch::Tensor&) -> torch::Tensor {
    throw std::runtime_error("boom");
  };
  r = filtered_rank(test, known_triples{}, space, throws, {});
  REQUIRE_FALSE(r.has_value());
  CHECK(r.error().message.find("boom") != std::string::npos);
}

TEST_CASE("known triples load from bucket files as global ids") {
  abg::test::scratch_dir dir;
  const auto space = tiny_space();
  const auto id = abg::storage::dataset_id::random();
  abg::storage::edge_manifest manifest;
  manifest.id = id;
  manifest.lhs_partitions = manifest.rhs_partitions = 2;
  manifest.num_relations = 2;
  manifest.entity_types = {{"A", {3, 4}}, {"B", {5}}};
  // Bucket (1, 0): relation 0 edges A(p1) -> A(p0), relation 1 edge A(p1) -> B(p0, the only one).
  struct edge { std::uint64_t l, r, rel; };
  const std::vector<std::pair<std::pair<int, int>, std::vector<edge>>> buckets{
    {{1, 0}, {{0, 2, 0}, {3, 1, 0}, {2, 4, 1}}}, {{0, 1}, {{1, 3, 0}}}};
  for (const auto& [lr, es] : buckets) {
    const auto name = abg::storage::bucket_file_name(lr.first, lr.second);
    auto w = abg::storage::bucket_writer::create(dir.path() / name, id,
                                                 {.edge_count = es.size(), .id_width = 4, .has_weights = false});
    REQUIRE(w.has_value());
    for (const auto& e : es)
      REQUIRE(w->append(e.l, e.r, e.rel, 1.0f).has_value());
    auto sum = w->commit();
    REQUIRE(sum.has_value());
    manifest.buckets.push_back({lr.first, lr.second, es.size(), name, *sum});
  }
  REQUIRE(abg::storage::write_edge_manifest(dir.path(), manifest).has_value());

  auto edges = read_edge_path(dir.path(), space, &id);
  REQUIRE(edges.has_value());
  std::vector<triple> want{{3, 0, 2}, {6, 0, 1}, {5, 1, 4}, {1, 0, 6}};
  std::ranges::sort(*edges, {}, [](const triple& t) { return std::tuple(t.lhs, t.rel, t.rhs); });
  std::ranges::sort(want, {}, [](const triple& t) { return std::tuple(t.lhs, t.rel, t.rhs); });
  CHECK((*edges == want));
  auto known = load_known_triples({dir.path(), dir.path()}, space, &id);
  REQUIRE(known.has_value());
  CHECK(known->size() == 4);
  CHECK(known->contains({6, 0, 1}));
}

// Speed check, skipped by default: run with
//   abg_learn_tests -tc="filtered ranking speed*" --no-skip
TEST_CASE("filtered ranking speed at FB15k-237 size" * doctest::skip()) {
  const std::int64_t n = 14541, dim = 200, num_rel = 237, num_test = 20466;
  const entity_space space({entity_index({n})}, std::vector<std::pair<std::size_t, std::size_t>>(num_rel, {0, 0}));
  torch::manual_seed(0);
  const auto emb = torch::randn({n, dim});
  const auto rel_emb = torch::randn({num_rel, dim});
  const score_fn dot = [&](side, std::int64_t rel, const torch::Tensor& a, const torch::Tensor& c) {
    return torch::matmul(emb.index_select(0, a) * rel_emb[rel], emb.index_select(0, c).t());
  };
  std::mt19937 rng(1);
  std::vector<triple> train, test;
  for (int i = 0; i < 272115; ++i)
    train.push_back({static_cast<std::int64_t>(rng() % n), static_cast<std::int64_t>(rng() % num_rel),
                     static_cast<std::int64_t>(rng() % n)});
  test.assign(train.begin(), train.begin() + num_test);
  const auto t0 = std::chrono::steady_clock::now();
  const known_triples known(train);
  const auto t1 = std::chrono::steady_clock::now();
  auto r = filtered_rank(test, known, space, dot, {.batch_size = 1000, .threads = 2});
  const auto t2 = std::chrono::steady_clock::now();
  REQUIRE(r.has_value());
  MESSAGE(fmt::format("index {:.2f} s, ranking {} edges x {} entities: {:.2f} s; {}",
                      std::chrono::duration<double>(t1 - t0).count(), num_test, n,
                      std::chrono::duration<double>(t2 - t1).count(), r->stats.overall.to_string()));
}

TEST_CASE("gather_rows: rows of partitions back to back, as from the joined table, without joining them") {
  const std::vector<torch::Tensor> parts{torch::arange(6, torch::kFloat).reshape({3, 2}),
                                         torch::arange(6, 14, torch::kFloat).reshape({4, 2}),
                                         torch::zeros({0, 2}), torch::arange(14, 16, torch::kFloat).reshape({1, 2})};
  const auto joined = torch::cat(parts);
  for (const auto& ids : {torch::tensor({4, 3, 6}, torch::kLong), torch::tensor({7, 0, 5, 2, 7}, torch::kLong),
                          torch::arange(0, 8, torch::kLong), torch::tensor({1}, torch::kLong),
                          torch::empty({0}, torch::kLong)}) {
    CAPTURE(ids);
    const auto got = abg::eval::gather_rows(parts, ids);
    CHECK(torch::equal(got, joined.index_select(0, ids)));
  }
  // Within one partition: a gather from that partition alone.
  CHECK(torch::equal(abg::eval::gather_rows(parts, torch::tensor({5, 3}, torch::kLong)),
                     parts[1].index_select(0, torch::tensor({2, 0}, torch::kLong))));
  CHECK_THROWS_AS(abg::eval::gather_rows(parts, torch::tensor({8}, torch::kLong)), std::out_of_range);
  CHECK_THROWS_AS(abg::eval::gather_rows(parts, torch::tensor({-1}, torch::kLong)), std::out_of_range);
}
