// The bucket kernel: learns, reproducible with one worker, HOGWILD with two,
// stop flag, errors. kernel_bench (skipped by default) measures edges/s.
#include <atomic>
#include <cstdlib>
#include <functional>
#include <random>

#include <doctest/doctest.h>

#include "abg/model/kernel.h"
#include "runtime/train/all_negs_step.h"

using namespace abg;
using namespace abg::model;
using abg::train::bucket_edges;
using abg::train::kernel_options;
using abg::train::train_bucket;

namespace {

config kernel_config(std::string op = "none", std::int64_t dim = 16) {
  config c;
  entity_schema e;
  e.num_partitions = 1;
  c.entities.emplace_back("node", e);
  relation_schema r;
  r.name = "links";
  r.lhs = "node";
  r.rhs = "node";
  r.operator_ = std::move(op);
  c.relations.push_back(r);
  c.dimension = dim;
  c.num_batch_negs = 10;
  c.num_uniform_negs = 10;
  c.lr = 0.1;
  return c;
}

// 10 communities of n/10 nodes, edges inside a community; relation ids in [0, num_rel).
bucket_edges community_graph(std::int64_t n, std::int64_t e, std::int64_t num_rel, std::uint64_t seed,
                             bool weights = false) {
  std::mt19937_64 rng(seed);
  const std::int64_t size = n / 10;
  std::uniform_int_distribution<std::int64_t> node(0, n - 1), member(0, size - 1), rel(0, num_rel - 1);
  std::vector<std::int64_t> l, r, t;
  std::vector<float> w;
  for (std::int64_t i = 0; i < e; ++i) {
    const auto a = node(rng);
    const auto rr = rel(rng);
    // relation rr shifts the community: structure an operator can learn
    const auto community = (a / size + rr) % 10;
    l.push_back(a);
    r.push_back(community * size + member(rng));
    t.push_back(rr);
    w.push_back(0.5f + static_cast<float>(i % 3) * 0.5f);
  }
  bucket_edges b;
  b.lhs = torch::tensor(l);
  b.rhs = torch::tensor(r);
  b.rel = torch::tensor(t);
  if (weights) b.weight = torch::tensor(w);
  return b;
}

struct run_result {
  std::vector<double> losses;
  table tab;
  shared_params params;
};

run_result run_epochs(const model_desc& m, const bucket_edges& edges, std::int64_t n, int epochs,
                      kernel_options o) {
  run_result r{{}, init_table(n, m.dims[0], m.init_scale, 42), shared_params::init(m)};
  std::atomic<bool> stop{false};
  for (int ep = 0; ep < epochs; ++ep) {
    o.seed += 1;
    auto s = train_bucket(m, r.tab, r.tab, r.params, edges, o, stop);
    REQUIRE(s.has_value());
    CHECK(s->edges == edges.size());
    r.losses.push_back(s->loss / static_cast<double>(s->edges));
  }
  return r;
}

} // namespace

TEST_CASE("kernel_decreases_loss") {
  auto m = *model_desc::from(kernel_config());
  auto edges = community_graph(200, 4000, 1, 1);
  kernel_options o;
  o.batch_size = 100;
  auto r = run_epochs(m, edges, 200, 10, o);
  CAPTURE(r.losses.front());
  CAPTURE(r.losses.back());
  CHECK(r.losses.back() < 0.5 * r.losses.front());
  CHECK(std::isfinite(r.losses.back()));
  // the global embedding moved
  CHECK(r.params.values.at("global_emb.node").abs().sum().item<double>() > 0);
}

TEST_CASE("kernel_reproducible_with_one_worker") {
  auto m = *model_desc::from(kernel_config("diagonal"));
  auto edges = community_graph(200, 3000, 1, 2, true);
  kernel_options o;
  o.batch_size = 64;
  o.seed = 9;
  auto a = run_epochs(m, edges, 200, 2, o);
  auto b = run_epochs(m, edges, 200, 2, o);
  CHECK(a.losses == b.losses);
  CHECK(torch::equal(a.tab.embeddings, b.tab.embeddings));
  CHECK(torch::equal(a.tab.state, b.tab.state));
  CHECK(torch::equal(a.params.values.at("relations.0.rhs.diagonal"), b.params.values.at("relations.0.rhs.diagonal")));
  o.seed = 10;
  auto c = run_epochs(m, edges, 200, 2, o);
  CHECK_FALSE(torch::equal(a.tab.embeddings, c.tab.embeddings));
}

TEST_CASE("kernel_two_workers_hogwild") {
  auto m = *model_desc::from(kernel_config());
  auto edges = community_graph(200, 4000, 1, 3);
  kernel_options o;
  o.batch_size = 100;
  o.workers = 2;
  auto r = run_epochs(m, edges, 200, 8, o);
  CHECK(r.losses.back() < 0.6 * r.losses.front());
}

TEST_CASE("kernel_several_relations_and_operators") {
  auto c = kernel_config("translation");
  auto r2 = c.relations[0];
  r2.name = "other";
  r2.operator_ = "linear";
  r2.weight = 2.0;
  c.relations.push_back(r2);
  auto m = *model_desc::from(c);
  auto edges = community_graph(200, 4000, 2, 4, true);
  kernel_options o;
  o.batch_size = 100;
  auto r = run_epochs(m, edges, 200, 6, o);
  CHECK(r.losses.back() < r.losses.front());
  CHECK(r.params.values.at("relations.0.rhs.translation").abs().sum().item<double>() > 0);
  CHECK_FALSE(torch::equal(r.params.values.at("relations.1.rhs.linear_transformation"), torch::eye(16)));
}

TEST_CASE("kernel_dynamic_complex_softmax") {
  auto c = kernel_config("complex_diagonal");
  c.dynamic_relations = true;
  c.comparator = "dot";
  c.loss_fn = "softmax";
  c.global_emb = false;
  c.regularization_coef = 1e-3;
  c.num_uniform_negs = 50;
  auto m = *model_desc::from(c, 3);
  auto edges = community_graph(200, 4000, 3, 5);
  kernel_options o;
  o.batch_size = 100;
  auto r = run_epochs(m, edges, 200, 6, o);
  CAPTURE(r.losses.front());
  CAPTURE(r.losses.back());
  CHECK(r.losses.back() < 0.8 * r.losses.front());
  CHECK_FALSE(torch::equal(r.params.values.at("relations.2.lhs.imag"), torch::zeros({8})));
  CHECK_FALSE(r.params.values.contains("global_emb.node"));
}

TEST_CASE("kernel_max_norm_and_all_negs") {
  auto c = kernel_config("diagonal");
  c.max_norm = 0.5;
  c.relations[0].all_negs = true;
  c.init_scale = 1.0;
  auto m = *model_desc::from(c);
  auto edges = community_graph(100, 500, 1, 6);
  kernel_options o;
  o.batch_size = 50;
  auto r = run_epochs(m, edges, 100, 1, o);
  CHECK(std::isfinite(r.losses[0]));
  // every row that was looked up was renormalised before its update; the update is small
  CHECK(r.tab.embeddings.norm(2, 1).max().item<double>() < 0.95);
}

TEST_CASE("kernel_stop_and_errors") {
  auto m = *model_desc::from(kernel_config());
  auto edges = community_graph(100, 500, 1, 7);
  auto tab = init_table(100, 16, 1e-3, 1);
  auto p = shared_params::init(m);
  std::atomic<bool> stop{true};
  kernel_options o;
  auto s = train_bucket(m, tab, tab, p, edges, o, stop);
  REQUIRE(s.has_value());
  CHECK(s->edges == 0);

  stop = false;
  kernel_options gpu;
  gpu.num_gpus = 1;
  if (!torch::cuda::is_available()) {
    auto g = train_bucket(m, tab, tab, p, edges, gpu, stop);
    REQUIRE_FALSE(g.has_value());
    CHECK(g.error().message.find("CUDA") != std::string::npos);
  }

  auto bad = edges;
  bad.rhs = edges.rhs.clone();
  bad.rhs[3] = 100;
  auto b = train_bucket(m, tab, tab, p, bad, o, stop);
  REQUIRE_FALSE(b.has_value());
  CHECK(b.error().message.find("rhs offset 100") != std::string::npos);
  auto badrel = edges;
  badrel.rel = edges.rel.clone();
  badrel.rel[0] = 1;
  CHECK_FALSE(train_bucket(m, tab, tab, p, badrel, o, stop).has_value());
}

// PBG defaults on a synthetic 1-partition graph. Run with
//   abg_learn_tests -tc=kernel_bench --no-skip
// (ABG_BENCH_NODES, ABG_BENCH_EDGES, ABG_BENCH_WORKERS override the size).
TEST_CASE("kernel_bench" * doctest::skip()) {
  auto env = [](const char* name, std::int64_t def) {
    const char* v = std::getenv(name);
    return v != nullptr ? std::atoll(v) : def;
  };
  const auto n = env("ABG_BENCH_NODES", 82'000), e = env("ABG_BENCH_EDGES", 929'541);
  auto c = kernel_config("none", 100);
  c.num_batch_negs = 50;
  c.num_uniform_negs = 50;
  c.lr = 0.01;
  auto m = *model_desc::from(c);
  std::mt19937_64 rng(1);
  std::uniform_int_distribution<std::int64_t> node(0, n - 1);
  std::vector<std::int64_t> l(static_cast<std::size_t>(e)), r(static_cast<std::size_t>(e));
  for (auto& x : l) x = node(rng);
  for (auto& x : r) x = node(rng);
  bucket_edges edges;
  edges.lhs = torch::tensor(l);
  edges.rhs = torch::tensor(r);
  edges.rel = torch::zeros({e}, torch::kLong);
  auto tab = init_table(n, 100, 1e-3, 1);
  auto p = shared_params::init(m);
  kernel_options o;
  o.workers = env("ABG_BENCH_WORKERS", 2);
  o.batch_size = 1000;
  std::atomic<bool> stop{false};
  auto s = train_bucket(m, tab, tab, p, edges, o, stop);
  REQUIRE(s.has_value());
  MESSAGE(fmt::format("kernel_bench: {} edges, {} workers, {:.2f} s, {:.0f} edges/s, loss/edge {:.4f}", s->edges,
                      o.workers, s->seconds, static_cast<double>(s->edges) / s->seconds,
                      s->loss / static_cast<double>(s->edges)));
}

// One batch through the kernel equals the same step computed directly: the
// whole table as one autograd leaf, then the Adagrad formulas.
TEST_CASE("kernel_step_matches_direct_computation") {
  auto c = kernel_config("diagonal", 6);
  c.comparator = "dot";
  c.num_batch_negs = 8; // one chunk: the loss does not depend on the shuffle
  c.num_uniform_negs = 0;
  c.regularization_coef = 0.01;
  c.lr = 0.05;
  c.relation_lr = 0.02;
  auto m = *model_desc::from(c);
  bucket_edges edges;
  edges.lhs = torch::tensor(std::vector<std::int64_t>{0, 1, 2, 1, 4});
  edges.rhs = torch::tensor(std::vector<std::int64_t>{1, 1, 3, 5, 0});
  edges.rel = torch::zeros({5}, torch::kLong);
  edges.weight = torch::tensor(std::vector<float>{1.f, 2.f, 0.5f, 1.f, 1.5f});
  auto tab = init_table(6, 6, 0.5, 3);
  auto p = shared_params::init(m);
  p.values.at("relations.0.rhs.diagonal").copy_(torch::linspace(0.5, 1.5, 6));
  p.values.at("global_emb.node").copy_(torch::linspace(-0.1, 0.1, 6));

  // direct
  auto emb = tab.embeddings.clone().requires_grad_(true);
  auto diag = p.values.at("relations.0.rhs.diagonal").clone().unsqueeze(0).requires_grad_(true);
  auto glob = p.values.at("global_emb.node").clone().requires_grad_(true);
  forward_inputs in;
  in.lhs_rows = emb.index_select(0, edges.lhs);
  in.rhs_rows = emb.index_select(0, edges.rhs);
  in.lhs_neg_rows = torch::zeros({1, 0, 6});
  in.rhs_neg_rows = torch::zeros({1, 0, 6});
  in.lhs_global = glob;
  in.rhs_global = glob;
  in.rhs_kind = op_kind::diagonal;
  in.rhs_op["diagonal"] = diag;
  std::mt19937_64 rng(0);
  auto ln = draw_negatives(m, side::lhs, 5, 6, false, rng);
  auto rn = draw_negatives(m, side::rhs, 5, 6, false, rng);
  auto loss = batch_loss(m, forward(m, in, ln, rn, edges.lhs, edges.rhs), edges.weight, 1.0);
  loss.backward();
  torch::NoGradGuard no_grad;
  auto g = emb.grad();
  auto state = g.pow(2).mean(1);
  auto want_emb = tab.embeddings - 0.05 * g / (state.sqrt() + 1e-10).unsqueeze(1);
  auto gd = diag.grad().squeeze(0);
  auto want_diag = p.values.at("relations.0.rhs.diagonal") - 0.02 * gd / (gd.abs() + 1e-10);
  auto gg = glob.grad();
  auto want_glob = p.values.at("global_emb.node") - 0.02 * gg / (gg.abs() + 1e-10);

  for (auto path : {abg::train::kernel_path::reference, abg::train::kernel_path::fused}) {
    CAPTURE(static_cast<int>(path));
    auto t = table{tab.embeddings.clone(), tab.state.clone()};
    auto q = p.clone();
    kernel_options o;
    o.batch_size = 8;
    o.path = path;
    std::atomic<bool> stop{false};
    auto s = train_bucket(m, t, t, q, edges, o, stop);
    REQUIRE(s.has_value());
    CHECK(s->fused == (path == abg::train::kernel_path::fused));
    CHECK(s->loss == doctest::Approx(loss.item<double>()).epsilon(1e-5));
    CHECK((t.state - state).abs().max().item<double>() < 1e-6 * std::max(1.0, state.max().item<double>()));
    CHECK((t.embeddings - want_emb).abs().max().item<double>() < 1e-5);
    CHECK((q.values.at("relations.0.rhs.diagonal") - want_diag).abs().max().item<double>() < 1e-5);
    CHECK((q.values.at("global_emb.node") - want_glob).abs().max().item<double>() < 1e-5);
  }
}

namespace {

// Trains `epochs` epochs of `edges` with one worker through the given path;
// two_tables: the lhs and rhs tables are different partitions.
struct path_run {
  std::vector<double> losses;
  table lhs, rhs;
  shared_params params;
};

path_run run_path(const model_desc& m, const bucket_edges& edges, std::int64_t n, bool two_tables,
                  abg::train::kernel_path path, double init_scale, std::int64_t workers = 1,
                  std::int64_t score_tile_floats = std::int64_t{1} << 23) {
  path_run r{{}, init_table(n, m.dims[0], init_scale, 42, m.state_width(0)),
             init_table(n, m.dims[0], init_scale, 43, m.state_width(0)), shared_params::init(m)};
  // operators away from identity, so their gradients matter
  for (auto& [key, t] : r.params.stacks) t.add_(torch::randn(t.sizes(), torch::kFloat).mul_(0.3));
  if (m.global_emb) r.params.values.at("global_emb.node").normal_(0.0, 0.05);
  kernel_options o;
  o.batch_size = 60;
  o.seed = 5;
  o.path = path;
  o.workers = workers;
  o.score_tile_floats = score_tile_floats;
  std::atomic<bool> stop{false};
  for (int ep = 0; ep < 2; ++ep) {
    o.seed += 1;
    auto s = two_tables ? train_bucket(m, r.lhs, r.rhs, r.params, edges, o, stop)
                        : train_bucket(m, r.lhs, r.lhs, r.params, edges, o, stop);
    REQUIRE(s.has_value());
    CHECK(s->fused == (path == abg::train::kernel_path::fused));
    r.losses.push_back(s->loss);
  }
  return r;
}

void check_close(const torch::Tensor& a, const torch::Tensor& b, const std::string& what) {
  CAPTURE(what);
  const auto diff = (a - b).abs().max().item<double>();
  const auto scale = std::max(1.0, b.abs().max().item<double>());
  CAPTURE(diff);
  CHECK(diff < 2e-4 * scale);
}

// The fused run trained as the reference did: losses, both tables and their
// Adagrad state, every shared parameter and its state.
void check_same_training(const path_run& fus, const path_run& ref) {
  for (std::size_t i = 0; i < ref.losses.size(); ++i)
    CHECK(fus.losses[i] == doctest::Approx(ref.losses[i]).epsilon(1e-4));
  check_close(fus.lhs.embeddings, ref.lhs.embeddings, "lhs embeddings");
  check_close(fus.lhs.state, ref.lhs.state, "lhs state");
  check_close(fus.rhs.embeddings, ref.rhs.embeddings, "rhs embeddings");
  check_close(fus.rhs.state, ref.rhs.state, "rhs state");
  for (const auto& [name, t] : ref.params.values) check_close(fus.params.values.at(name), t, name);
  for (const auto& [name, t] : ref.params.adagrad) check_close(fus.params.adagrad.at(name), t, "adagrad " + name);
}

// kbc's ComplEx recipe, which several variants build on: dot, softmax,
// complex_diagonal under dynamic relations, no global embeddings.
// Relation 0 with operator `op`, and a copy of it named "other" (one weighing `weight`).
void two_relations(config& c, const char* op, double weight = 1.0) {
  c.relations[0].operator_ = op;
  auto r2 = c.relations[0];
  r2.name = "other";
  r2.weight = weight;
  c.relations.push_back(r2);
}

void kbc_recipe(config& c) {
  c.relations[0].operator_ = "complex_diagonal";
  c.comparator = "dot";
  c.loss_fn = "softmax";
  c.dynamic_relations = true;
  c.global_emb = false;
}

// LibKGE's tuned WN18RR dropout: the query's entity and relation apart, and every candidate.
void libkge_dropout(config& c) {
  c.query_entity_dropout = 0.36;
  c.relation_dropout = 0.31;
  c.candidate_dropout = 0.36;
}

// One configuration both paths train: a config edit, the graph's shape.
struct variant {
  std::string name;
  std::function<void(config&)> edit;
  bool two_tables = false;
  std::int64_t num_rel = 1;
  bool weights = false;
};

} // namespace

// The fused CPU kernel equals the reference path, variant by variant: same
// losses, embeddings, Adagrad state and shared parameters after two epochs
// (several batches and chunks, a padded last chunk, repeated rows).
TEST_CASE("fused_kernel_equals_reference") {
  const std::vector<variant> variants = {
      {"pbg defaults: cos, ranking, none, global", [](config&) {}},
      {"dot softmax complex_diagonal dynamic N3",
       [](config& c) {
         kbc_recipe(c);
         c.regularization_coef = 1e-2;
       },
       false, 3},
      {"cos logistic diagonal, weights, max_norm, N3, two tables",
       [](config& c) {
         c.relations[0].operator_ = "diagonal";
         c.loss_fn = "logistic";
         c.max_norm = 0.8;
         c.regularization_coef = 1e-2;
         c.relations[0].weight = 1.5;
       },
       true, 1, true},
      // (with dot, a translation shifts all of an anchor's scores equally:
      // its gradient cancels to rounding noise under ranking and softmax)
      {"dot logistic translation, uniform negatives only, no lhs negatives",
       [](config& c) {
         c.relations[0].operator_ = "translation";
         c.comparator = "dot";
         c.loss_fn = "logistic";
         c.num_batch_negs = 0;
         c.disable_lhs_negs = true;
       }},
      {"cos softmax dynamic translation, batch negatives only, no rhs negatives",
       [](config& c) {
         c.relations[0].operator_ = "translation";
         c.loss_fn = "softmax";
         c.dynamic_relations = true;
         c.num_uniform_negs = 0;
         c.disable_rhs_negs = true;
       },
       true, 2},
      {"dot softmax complex_diagonal dynamic, kbc's N3 (moduli of head, relation, tail per query)",
       [](config& c) {
         kbc_recipe(c);
         c.regularizer = "N3_kbc";
         c.regularization_coef = 1e-2;
       },
       false, 3},
      {"cos ranking complex_diagonal, kbc's N3 with the batch's one operator, global, no rhs negatives",
       [](config& c) {
         c.relations[0].operator_ = "complex_diagonal";
         c.regularizer = "N3_kbc";
         c.regularization_coef = 1e-2;
         c.disable_rhs_negs = true;
       },
       true},
      {"cos logistic diagonal, element-wise entity Adagrad (kbc's), two tables",
       [](config& c) {
         c.relations[0].operator_ = "diagonal";
         c.loss_fn = "logistic";
         c.entity_optimizer = "adagrad";
       },
       true},
      {"two relations: diagonal and none, relation weights",
       [](config& c) {
         c.relations[0].operator_ = "diagonal";
         auto r2 = c.relations[0];
         r2.name = "other";
         r2.operator_ = "none";
         r2.weight = 2.0;
         c.relations.push_back(r2);
         c.comparator = "dot";
         c.loss_fn = "logistic";
       },
       false, 2, true},
  };
  for (const auto& v : variants) {
    CAPTURE(v.name);
    auto c = kernel_config("none", 12);
    c.num_batch_negs = 16; // 60-edge batches: chunks of 16, 16, 16, 12
    c.num_uniform_negs = 7;
    v.edit(c);
    auto m = *model_desc::from(c, v.num_rel);
    auto edges = community_graph(50, 400, v.num_rel, 11, v.weights);
    torch::manual_seed(1);
    auto ref = run_path(m, edges, 50, v.two_tables, abg::train::kernel_path::reference, 0.3);
    torch::manual_seed(1);
    auto fus = run_path(m, edges, 50, v.two_tables, abg::train::kernel_path::fused, 0.3);
    check_same_training(fus, ref);
  }
}

// Once most negatives are beaten by the margin, the fused path's ranking
// backward switches to its sparse form (fused_step.cpp, sparse_backward):
// from a trained state both paths must still agree.
TEST_CASE("fused_kernel_sparse_ranking_backward_equals_reference") {
  auto c = kernel_config("none", 16);
  c.num_batch_negs = 20;
  c.num_uniform_negs = 20;
  auto m = *model_desc::from(c);
  // a one-to-one graph (each node has a single partner): learnable to the
  // point where almost every negative is beaten by the margin
  bucket_edges edges;
  {
    std::vector<std::int64_t> l, r;
    for (std::int64_t i = 0; i < 2000; ++i) {
      l.push_back(i % 200);
      r.push_back((i % 200 * 37 + 11) % 200);
    }
    edges.lhs = torch::tensor(l);
    edges.rhs = torch::tensor(r);
    edges.rel = torch::zeros({2000}, torch::kLong);
  }
  auto tab = init_table(200, 16, 0.3, 7);
  auto p = shared_params::init(m);
  kernel_options o;
  o.batch_size = 100;
  std::atomic<bool> stop{false};
  double first = 0, last = 0;
  for (int ep = 0; ep < 40; ++ep) {
    o.seed = 100 + static_cast<std::uint64_t>(ep);
    auto s = train_bucket(m, tab, tab, p, edges, o, stop);
    REQUIRE(s.has_value());
    (ep == 0 ? first : last) = s->loss / static_cast<double>(s->edges);
  }
  CAPTURE(first);
  CAPTURE(last);
  // margin violations are rare by now (a few of the 80 negatives per edge):
  // most chunks' score gradients are below the sparse threshold
  REQUIRE(last < 0.06 * first);
  table ref{tab.embeddings.clone(), tab.state.clone()}, fus{tab.embeddings.clone(), tab.state.clone()};
  auto pr = p.clone(), pf = p.clone();
  o.seed = 999;
  o.path = abg::train::kernel_path::reference;
  auto a = train_bucket(m, ref, ref, pr, edges, o, stop);
  o.path = abg::train::kernel_path::fused;
  auto b = train_bucket(m, fus, fus, pf, edges, o, stop);
  REQUIRE(a.has_value());
  REQUIRE(b.has_value());
  CHECK(b->loss == doctest::Approx(a->loss).epsilon(1e-4));
  check_close(fus.embeddings, ref.embeddings, "embeddings");
  check_close(fus.state, ref.state, "state");
  check_close(pf.values.at("global_emb.node"), pr.values.at("global_emb.node"), "global embedding");
}

TEST_CASE("fused_kernel_refuses_what_it_does_not_cover") {
  auto c = kernel_config("linear");
  auto m = *model_desc::from(c);
  auto edges = community_graph(50, 100, 1, 12);
  auto tab = init_table(50, 16, 1e-3, 1);
  auto p = shared_params::init(m);
  kernel_options o;
  o.path = abg::train::kernel_path::fused;
  std::atomic<bool> stop{false};
  auto s = train_bucket(m, tab, tab, p, edges, o, stop);
  REQUIRE_FALSE(s.has_value());
  CHECK(s.error().message.find("operator linear") != std::string::npos);
  o.path = abg::train::kernel_path::automatic; // falls back to the reference path
  auto a = train_bucket(m, tab, tab, p, edges, o, stop);
  REQUIRE(a.has_value());
  CHECK_FALSE(a->fused);
}

// The fused 1-vs-all kernel (all_negs_step.cpp) equals the reference path's
// all_negs, variant by variant: every loss, comparator and operator it
// covers; with two threads and tiles of 7 entities (scores recomputed after
// the softmax's first pass) and with one thread and one tile (scores kept).
TEST_CASE("all_negs_kernel_equals_reference") {
  const std::vector<variant> variants = {
      {"dot softmax complex_diagonal dynamic N3 (kbc's 1vsAll)",
       [](config& c) {
         kbc_recipe(c);
         c.regularization_coef = 1e-2;
       },
       false, 3, true},
      {"dot softmax complex_diagonal dynamic, kbc's N3 (kbc's ComplEx-N3 with reciprocal relations)",
       [](config& c) {
         kbc_recipe(c);
         c.regularizer = "N3_kbc";
         c.regularization_coef = 1e-2;
       },
       false, 3},
      {"dot logistic diagonal without dynamic relations, kbc's N3, global embeddings",
       [](config& c) {
         c.relations[0].operator_ = "diagonal";
         c.comparator = "dot";
         c.loss_fn = "logistic";
         c.regularizer = "N3_kbc";
         c.regularization_coef = 1e-2;
       }},
      {"cos ranking diagonal, global embeddings, two tables, weights",
       [](config& c) {
         c.relations[0].operator_ = "diagonal";
         c.relations[0].weight = 1.5;
       },
       true, 1, true},
      {"dot logistic translation, no lhs negatives, N3",
       [](config& c) {
         c.relations[0].operator_ = "translation";
         c.comparator = "dot";
         c.loss_fn = "logistic";
         c.disable_lhs_negs = true;
         c.regularization_coef = 1e-2;
       }},
      {"dot softmax complex_diagonal without dynamic relations: the operator on every candidate",
       [](config& c) {
         two_relations(c, "complex_diagonal", 2.0);
         c.comparator = "dot";
         c.loss_fn = "softmax";
         c.regularization_coef = 1e-2;
       },
       false, 2},
      {"cos softmax none, global embeddings, no rhs negatives",
       [](config& c) {
         c.loss_fn = "softmax";
         c.disable_rhs_negs = true;
       },
       true},
      {"dot softmax complex_diagonal dynamic, kbc's N3, query and candidate dropout (LibKGE's)",
       [](config& c) {
         kbc_recipe(c);
         c.regularizer = "N3_kbc";
         c.regularization_coef = 1e-2;
         c.query_dropout = 0.3;
         c.candidate_dropout = 0.4;
       },
       false, 3},
      {"dot logistic complex_diagonal without dynamic relations, two relations, candidate dropout: masks after the "
       "operator",
       [](config& c) {
         two_relations(c, "complex_diagonal");
         c.comparator = "dot";
         c.loss_fn = "logistic";
         c.candidate_dropout = 0.25;
       },
       false, 2},
      {"cos ranking diagonal, global embeddings, two tables, query dropout",
       [](config& c) {
         c.relations[0].operator_ = "diagonal";
         c.query_dropout = 0.5;
       },
       true},
      {"dot softmax complex_diagonal dynamic, kbc's N3, element-wise entity Adagrad (kbc's and LibKGE's)",
       [](config& c) {
         kbc_recipe(c);
         c.regularizer = "N3_kbc";
         c.regularization_coef = 1e-2;
         c.entity_optimizer = "adagrad";
       },
       false, 3},
      {"dot softmax complex_diagonal dynamic, KvsAll (every known answer a target), kbc's N3, dropout",
       [](config& c) {
         kbc_recipe(c);
         c.all_negs_targets = "known";
         c.regularizer = "N3_kbc";
         c.regularization_coef = 1e-2;
         c.query_dropout = 0.3;
         c.candidate_dropout = 0.4;
       },
       false, 3},
      {"dot softmax complex_diagonal dynamic, kbc's N3, the query's entity and relation dropped apart (LibKGE's), "
       "candidate dropout",
       [](config& c) {
         kbc_recipe(c);
         c.regularizer = "N3_kbc";
         c.regularization_coef = 1e-2;
         libkge_dropout(c);
       },
       false, 3},
      {"dot softmax complex_diagonal without dynamic relations, two relations, kbc's N3, the query's entity and "
       "relation dropped apart: the operator moved onto the tail queries, conjugated; candidate dropout",
       [](config& c) {
         two_relations(c, "complex_diagonal", 2.0);
         c.comparator = "dot";
         c.loss_fn = "softmax";
         c.global_emb = false;
         c.regularizer = "N3_kbc";
         c.regularization_coef = 1e-2;
         libkge_dropout(c);
       },
       false, 2},
      {"dot logistic diagonal without dynamic relations, global embeddings, two tables, PBG's N3, relation dropout "
       "alone: the operator moved onto the tail queries",
       [](config& c) {
         two_relations(c, "diagonal");
         c.comparator = "dot";
         c.loss_fn = "logistic";
         c.regularization_coef = 1e-2;
         c.relation_dropout = 0.5;
       },
       true, 2},
      {"cos logistic diagonal dynamic, global embeddings, two tables, relation dropout alone",
       [](config& c) {
         c.relations[0].operator_ = "diagonal";
         c.loss_fn = "logistic";
         c.dynamic_relations = true;
         c.relation_dropout = 0.5;
       },
       true, 2},
      {"dot logistic diagonal without dynamic relations, two relations, weights, KvsAll",
       [](config& c) {
         two_relations(c, "diagonal");
         c.comparator = "dot";
         c.loss_fn = "logistic";
         c.all_negs_targets = "known";
       },
       false, 2, true},
      {"cos softmax none, global embeddings, two tables, KvsAll",
       [](config& c) {
         c.loss_fn = "softmax";
         c.all_negs_targets = "known";
       },
       true},
  };
  for (const auto& v : variants) {
    CAPTURE(v.name);
    auto c = kernel_config("none", 12);
    v.edit(c);
    for (auto& r : c.relations) r.all_negs = true;
    auto m = *model_desc::from(c, v.num_rel);
    auto edges = community_graph(50, 400, v.num_rel, 11, v.weights);
    torch::manual_seed(1);
    auto ref = run_path(m, edges, 50, v.two_tables, abg::train::kernel_path::reference, 0.3);
    for (const auto& [threads, tile] : {std::pair<std::int64_t, std::int64_t>{2, 60 * 7}, {1, 1 << 22}}) {
      CAPTURE(threads);
      torch::manual_seed(1);
      auto fus = run_path(m, edges, 50, v.two_tables, abg::train::kernel_path::fused, 0.3, threads, tile);
      check_same_training(fus, ref);
    }
    if (m.any_dropout()) {
      // the masks were applied: without them both paths train elsewhere
      auto plain_m = m;
      plain_m.query_dropout = plain_m.candidate_dropout = plain_m.query_entity_dropout = plain_m.relation_dropout = 0;
      torch::manual_seed(1);
      auto plain = run_path(plain_m, edges, 50, v.two_tables, abg::train::kernel_path::reference, 0.3);
      CHECK((plain.lhs.embeddings - ref.lhs.embeddings).abs().max().item<double>() > 1e-2);
    }
    if (m.known_targets) {
      // the other answers were targets: 1vsAll trains elsewhere
      auto one_m = m;
      one_m.known_targets = false;
      torch::manual_seed(1);
      auto one = run_path(one_m, edges, 50, v.two_tables, abg::train::kernel_path::reference, 0.3);
      CHECK((one.lhs.embeddings - ref.lhs.embeddings).abs().max().item<double>() > 1e-3);
    }
  }
}

// Factor dropout without dynamic relations moves the rhs operator onto the
// tail queries, conjugated: with masks that keep every element (a rate of
// 1e-9), both paths train exactly as the operator on the candidates does
// (the reference path there).
TEST_CASE("all_negs_operator_moved_onto_tail_queries_keeps_the_scores") {
  for (const char* op : {"complex_diagonal", "diagonal"}) {
    CAPTURE(op);
    auto c = kernel_config("none", 12);
    two_relations(c, op);
    c.comparator = "dot";
    c.loss_fn = "softmax";
    c.global_emb = false;
    c.regularizer = "N3_kbc";
    c.regularization_coef = 1e-2;
    for (auto& r : c.relations) r.all_negs = true;
    // any dropout draws each batch's mask seed from the worker's generator, so both runs drop something
    c.candidate_dropout = 1e-9;
    const auto on_candidates = *model_desc::from(c, 2);
    c.query_entity_dropout = c.relation_dropout = 1e-9;
    const auto moved = *model_desc::from(c, 2);
    const auto edges = community_graph(50, 400, 2, 13);
    torch::manual_seed(1);
    const auto plain = run_path(on_candidates, edges, 50, false, abg::train::kernel_path::reference, 0.3);
    for (const auto path : {abg::train::kernel_path::reference, abg::train::kernel_path::fused}) {
      torch::manual_seed(1);
      CAPTURE(static_cast<int>(path));
      const bool fused = path == abg::train::kernel_path::fused;
      check_same_training(run_path(moved, edges, 50, false, path, 0.3, fused ? 2 : 1, fused ? 60 * 7 : 1 << 23), plain);
    }
  }
}

// all_negs_precision = "bfloat16": the products take bfloat16 inputs, so
// training moves off float32's, by about that rounding and no more; with
// several tiles per thread (scores recomputed) and with one.
TEST_CASE("all_negs_bf16_products_train_as_float32_up_to_rounding") {
  if (!abg::train::bf16_products_available()) {
    MESSAGE("skipped: this CPU has no AVX512-BF16 (or oneDNN is not loaded), so bfloat16 products run in float32");
    return;
  }
  auto c = kernel_config("none", 16);
  kbc_recipe(c);
  c.relations[0].all_negs = true;
  c.regularizer = "N3_kbc";
  c.regularization_coef = 1e-2;
  libkge_dropout(c);
  const auto m32 = *model_desc::from(c, 3);
  c.all_negs_precision = "bfloat16";
  const auto m16 = *model_desc::from(c, 3);
  REQUIRE(m16.bf16_products);
  const auto edges = community_graph(50, 400, 3, 11);
  for (const std::int64_t tile : {std::int64_t{60 * 7}, std::int64_t{1} << 22}) {
    CAPTURE(tile);
    torch::manual_seed(1);
    const auto f32 = run_path(m32, edges, 50, false, abg::train::kernel_path::fused, 0.3, 2, tile);
    torch::manual_seed(1);
    const auto b16 = run_path(m16, edges, 50, false, abg::train::kernel_path::fused, 0.3, 2, tile);
    const auto diff = (b16.lhs.embeddings - f32.lhs.embeddings).abs().max().item<double>();
    const auto scale = f32.lhs.embeddings.abs().max().item<double>();
    CAPTURE(diff);
    CAPTURE(scale);
    CHECK(diff > 1e-6 * scale); // the bfloat16 products ran
    CHECK(diff < 1e-2 * scale);
    for (std::size_t i = 0; i < f32.losses.size(); ++i)
      CHECK(b16.losses[i] == doctest::Approx(f32.losses[i]).epsilon(1e-3));
  }
}

TEST_CASE("bf16_config_checks") {
  auto c = kernel_config("none", 8);
  c.all_negs_precision = "bfloat16";
  auto m = model_desc::from(c);
  REQUIRE_FALSE(m.has_value());
  CHECK(m.error().message.find("applies to 1-vs-all training only, and relation 'links' has no all_negs") !=
        std::string::npos);
  c.relations[0].all_negs = true;
  m = model_desc::from(c);
  REQUIRE(m.has_value());
  CHECK(m->bf16_products);
}

// KvsAll applies to 1-vs-all training with the softmax or logistic loss.
TEST_CASE("kvsall_config_checks") {
  auto c = kernel_config("none", 8);
  c.all_negs_targets = "known";
  auto m = model_desc::from(c);
  REQUIRE_FALSE(m.has_value());
  CHECK(m.error().message.find("relation 'links' has no all_negs") != std::string::npos);
  c.relations[0].all_negs = true;
  m = model_desc::from(c);
  REQUIRE_FALSE(m.has_value());
  CHECK(m.error().message.find("softmax or logistic, not ranking") != std::string::npos);
  c.loss_fn = "softmax";
  m = model_desc::from(c);
  REQUIRE(m.has_value());
  CHECK(m->known_targets);
  c.all_negs_targets = "all";
  m = model_desc::from(c);
  REQUIRE_FALSE(m.has_value());
  CHECK(m.error().message.find("unknown all_negs_targets 'all'") != std::string::npos);
}

// Dropout applies to 1-vs-all training only, with a fraction below 1.
TEST_CASE("dropout_config_checks") {
  auto c = kernel_config("none", 8);
  c.query_dropout = 0.3;
  auto m = model_desc::from(c);
  REQUIRE_FALSE(m.has_value());
  CHECK(m.error().message.find("relation 'links' has no all_negs") != std::string::npos);
  c.relations[0].all_negs = true;
  m = model_desc::from(c);
  REQUIRE(m.has_value());
  CHECK(m->query_dropout == doctest::Approx(0.3));
  c.candidate_dropout = 1.0;
  m = model_desc::from(c);
  REQUIRE_FALSE(m.has_value());
  CHECK(m.error().message.find("candidate_dropout = 1: expected a fraction in [0, 1)") != std::string::npos);
  // the query's factors apart: without dynamic relations only where the
  // operator can move onto the tail queries, and never with query_dropout
  c.candidate_dropout = 0;
  c.relation_dropout = 0.3;
  c.comparator = "cos";
  m = model_desc::from(c);
  REQUIRE_FALSE(m.has_value());
  CHECK(m.error().message.find("relation_dropout = 0.3 without dynamic_relations needs comparator = \"dot\"") !=
        std::string::npos);
  c.comparator = "dot";
  c.relations[0].operator_ = "translation";
  m = model_desc::from(c);
  REQUIRE_FALSE(m.has_value());
  CHECK(m.error().message.find("relation 'links' has operator 'translation', which cannot move onto the tail") !=
        std::string::npos);
  c.relations[0].operator_ = "complex_diagonal";
  m = model_desc::from(c);
  REQUIRE_FALSE(m.has_value());
  CHECK(m.error().message.find("both drop the query; set one of them to 0") != std::string::npos);
  c.relations[0].operator_ = "none";
  c.comparator = "cos";
  c.dynamic_relations = true;
  m = model_desc::from(c, 1);
  REQUIRE_FALSE(m.has_value());
  CHECK(m.error().message.find("both drop the query; set one of them to 0") != std::string::npos);
  c.query_dropout = 0;
  c.query_entity_dropout = 0.2;
  m = model_desc::from(c, 1);
  REQUIRE(m.has_value());
  CHECK(m->relation_dropout == doctest::Approx(0.3));
  CHECK(m->query_entity_dropout == doctest::Approx(0.2));
}

TEST_CASE("all_negs_kernel_refuses_what_it_does_not_cover") {
  auto c = kernel_config("none");
  c.relations[0].all_negs = true;
  c.max_norm = 0.5;
  auto m = *model_desc::from(c);
  auto edges = community_graph(50, 100, 1, 12);
  auto tab = init_table(50, 16, 1e-3, 1);
  auto p = shared_params::init(m);
  kernel_options o;
  o.path = abg::train::kernel_path::fused;
  std::atomic<bool> stop{false};
  auto s = train_bucket(m, tab, tab, p, edges, o, stop);
  REQUIRE_FALSE(s.has_value());
  CHECK(s.error().message.find("max_norm") != std::string::npos);
  o.path = abg::train::kernel_path::automatic;
  auto a = train_bucket(m, tab, tab, p, edges, o, stop);
  REQUIRE(a.has_value());
  CHECK_FALSE(a->fused);
}
