// The torch-free scorer (abg/model/plain_score.h) against LibTorch's
// score_candidates for every operator × comparator × bias × side × dynamic
// relations, with random tables and parameters; its cosine against
// cosine_similarity; and the selection of the best k.
#include <cmath>
#include <limits>

#include "abg/model/model.h"
#include "abg/model/plain_score.h"
#include "abg/model/top_k.h"

#include <doctest/doctest.h> // after LibTorch: its CHECK, not glog's
#include <fmt/format.h>

using namespace abg::model;

namespace {

// Two entity types (so each side has its own global embedding), three
// relation entries (or ids, with dynamic relations); relation 1 is scored.
abg::config two_type_config(const std::string& op, const std::string& cmp, bool bias, bool dynamic,
                            std::int64_t dim) {
  abg::config c;
  abg::entity_schema e;
  e.num_partitions = 1;
  c.entities.emplace_back("a", e);
  c.entities.emplace_back("b", e);
  for (int r = 0; r < (dynamic ? 1 : 3); ++r) {
    abg::relation_schema rs;
    rs.name = fmt::format("r{}", r);
    rs.lhs = "a";
    rs.rhs = "b";
    rs.operator_ = r == 1 || dynamic ? op : "diagonal";
    c.relations.push_back(rs);
  }
  c.dimension = dim;
  c.comparator = cmp;
  c.bias = bias;
  c.dynamic_relations = dynamic;
  return c;
}

// Every shared parameter random (the identity would hide mistakes); matrices
// scaled by 1/√d so that scores keep the magnitudes of trained models.
void randomise(shared_params& p, std::uint64_t seed) {
  torch::manual_seed(seed);
  torch::NoGradGuard no_grad;
  for (auto& [name, t] : p.values) {
    const double scale = t.dim() == 2 ? 1.0 / std::sqrt(static_cast<double>(t.size(0))) : 0.5;
    t.copy_(torch::randn(t.sizes()) * scale);
  }
}

param_lookup lookup_of(const shared_params& p) {
  return [&p](std::string_view name) -> std::span<const float> {
    auto it = p.values.find(std::string(name));
    if (it == p.values.end())
      return {};
    const auto& t = it->second;
    REQUIRE(t.is_contiguous());
    return {t.data_ptr<float>(), static_cast<std::size_t>(t.numel())};
  };
}

std::vector<float> plain_scores(const plain_scorer& s, const torch::Tensor& candidates, int threads) {
  std::vector<float> out(static_cast<std::size_t>(candidates.size(0)));
  s.score({candidates.data_ptr<float>(), static_cast<std::size_t>(candidates.numel())}, out, threads);
  return out;
}

// The largest difference, relative to the score where it exceeds 1 (float
// sums of large scores differ in their last bits whichever way they are added).
double max_diff(const torch::Tensor& expected, const std::vector<float>& got) {
  REQUIRE(expected.numel() == static_cast<std::int64_t>(got.size()));
  auto e = expected.contiguous();
  double worst = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double want = e.data_ptr<float>()[i];
    worst = std::max(worst, std::abs(want - got[i]) / std::max(1.0, std::abs(want)));
  }
  return worst;
}

} // namespace

TEST_CASE("plain scorer equals score_candidates: operators x comparators x bias x side x dynamic relations") {
  int cases = 0;
  for (std::int64_t dim : {10, 36})
    for (const char* op : {"none", "diagonal", "translation", "linear", "affine", "complex_diagonal"})
      for (const char* cmp : {"dot", "cos", "l2", "squared_l2"})
        for (bool bias : {false, true})
          for (bool dynamic : {false, true}) {
            auto cfg = two_type_config(op, cmp, bias, dynamic, dim);
            auto m = model_desc::from(cfg, 3);
            REQUIRE(m);
            auto p = shared_params::init(*m);
            randomise(p, static_cast<std::uint64_t>(cases));
            const std::int64_t rel = 1;
            // 150 candidates: two full blocks of 64 and a tail that is not a multiple of 4.
            auto anchor = torch::randn({1, dim});
            auto candidates = torch::randn({150, dim});
            auto rel_ids = torch::full({1}, rel, torch::kInt64);
            auto filler = candidates.narrow(0, 0, 1);
            for (side s : {side::rhs, side::lhs}) {
              CAPTURE(dim);
              const std::string op_name = op, cmp_name = cmp;
              CAPTURE(op_name);
              CAPTURE(cmp_name);
              CAPTURE(bias);
              CAPTURE(dynamic);
              CAPTURE(to_string(s));
              auto expected = s == side::rhs
                                ? score_candidates(*m, p, s, anchor, filler, rel_ids, candidates).neg.squeeze(0)
                                : score_candidates(*m, p, s, filler, anchor, rel_ids, candidates).neg.squeeze(0);
              auto scorer = plain_scorer::for_relation(*m, rel, s, lookup_of(p));
              REQUIRE(scorer);
              scorer->set_anchor({anchor.data_ptr<float>(), static_cast<std::size_t>(dim)});
              CHECK(max_diff(expected, plain_scores(*scorer, candidates, 1)) <= 1e-4);
              ++cases;
            }
          }
  CHECK(cases == 2 * 6 * 4 * 2 * 2 * 2);
}

TEST_CASE("plain scorer: threads split the rows without changing a score; missing parameters are named") {
  abg::config cfg = two_type_config("linear", "cos", false, false, 20);
  auto m = model_desc::from(cfg);
  REQUIRE(m);
  auto p = shared_params::init(*m);
  randomise(p, 99);
  auto anchor = torch::randn({1, 20});
  auto candidates = torch::randn({100'003, 20});
  auto scorer = plain_scorer::for_relation(*m, 1, side::rhs, lookup_of(p));
  REQUIRE(scorer);
  scorer->set_anchor({anchor.data_ptr<float>(), 20});
  auto one = plain_scores(*scorer, candidates, 1);
  auto three = plain_scores(*scorer, candidates, 3);
  CHECK(one == three);
  auto expected =
    score_candidates(*m, p, side::rhs, anchor, candidates.narrow(0, 0, 1), torch::full({1}, 1, torch::kInt64),
                     candidates)
      .neg.squeeze(0);
  CHECK(max_diff(expected, three) <= 1e-4);

  auto missing = [&](std::string_view name) -> std::span<const float> {
    return name == "relations.1.rhs.linear_transformation" ? std::span<const float>{} : lookup_of(p)(name);
  };
  auto refused = plain_scorer::for_relation(*m, 1, side::rhs, missing);
  REQUIRE_FALSE(refused);
  CHECK(refused.error().message.find("'relations.1.rhs.linear_transformation' is missing") != std::string::npos);
  auto short_global = [&](std::string_view name) -> std::span<const float> {
    auto v = lookup_of(p)(name);
    return name == "global_emb.a" ? v.first(3) : v;
  };
  auto wrong = plain_scorer::for_relation(*m, 1, side::rhs, short_global);
  REQUIRE_FALSE(wrong);
  CHECK(wrong.error().message.find("'global_emb.a' holds 3 values in the checkpoint, the model expects [20]") !=
        std::string::npos);
}

TEST_CASE("plain scorer: cosine of the embeddings with the global embedding, as cosine_similarity") {
  const std::int64_t dim = 12;
  auto table = torch::randn({300, dim});
  auto global = torch::randn({dim});
  for (bool with_global : {false, true}) {
    auto g = with_global ? global : torch::zeros({dim});
    auto expected = torch::nn::functional::cosine_similarity(
      table + g, (table + g).narrow(0, 7, 1), torch::nn::functional::CosineSimilarityFuncOptions().dim(1).eps(1e-12));
    auto scorer = plain_scorer::cosine(
      dim, with_global ? std::span<const float>(global.data_ptr<float>(), dim) : std::span<const float>{});
    scorer.set_anchor({table.data_ptr<float>() + 7 * dim, static_cast<std::size_t>(dim)});
    auto got = plain_scores(scorer, table, 2);
    CHECK(max_diff(expected, got) <= 1e-5);
    CHECK(std::abs(got[7] - 1.0f) <= 1e-5);
  }
}

TEST_CASE("top_k equals LibTorch's topk on distinct scores and breaks ties by index") {
  torch::manual_seed(3);
  auto scores = torch::randn({10'000});
  std::span<const float> s(scores.data_ptr<float>(), 10'000);
  for (std::int64_t k : {1, 10, 1000}) {
    auto [values, indices] = scores.topk(k);
    auto best = top_k(s, k);
    REQUIRE(static_cast<std::int64_t>(best.size()) == k);
    for (std::int64_t i = 0; i < k; ++i) {
      CHECK(best[static_cast<std::size_t>(i)].index == indices[i].item<std::int64_t>());
      CHECK(best[static_cast<std::size_t>(i)].score == values[i].item<float>());
    }
  }
  std::vector<float> ties{1, 3, 3, -std::numeric_limits<float>::infinity(), std::nanf(""), 3, 2};
  auto best = top_k(ties, 100);
  REQUIRE(best.size() == ties.size());
  std::vector<std::int64_t> order;
  for (auto& b : best)
    order.push_back(b.index);
  CHECK(order == std::vector<std::int64_t>{1, 2, 5, 6, 0, 3, 4});
  auto two = top_k(ties, 2);
  REQUIRE(two.size() == 2);
  CHECK((two[0] == scored_index{1, 3.0f}));
  CHECK((two[1] == scored_index{2, 3.0f}));
  CHECK(top_k(ties, 0).empty());
}
