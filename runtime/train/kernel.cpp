// The bucket kernel: HOGWILD worker threads, each training its share of the
// edges batch by batch through the fused CPU step (fused_step.cpp) or the
// reference path below (LibTorch autograd per batch, Adagrad applied in
// place). See kernel.h, docs/model.md.
#include "abg/model/kernel.h"

#include "runtime/train/all_negs_step.h"
#include "runtime/train/dropout.h"
#include "runtime/train/fused_step.h"
#include "runtime/train/known_answers.h"

#include <dlfcn.h>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <mutex>
#include <numeric>
#include <optional>
#include <random>
#include <span>
#include <thread>

namespace abg::train {

namespace {

using model::side;

// Each worker runs single-threaded BLAS: the workers are the parallelism.
void single_threaded_blas() {
  at::set_num_threads(1);
  using set_threads_fn = void (*)(int);
  // Looked up at run time: libopenblas is linked only indirectly (through
  // LibTorch's BLAS), and may be absent (reference BLAS).
  static const auto fn = reinterpret_cast<set_threads_fn>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"));
  if (fn != nullptr) fn(1);
}

struct gathered {
  model::table* table = nullptr;
  torch::Tensor uniq; // distinct offsets
  torch::Tensor leaf; // [K, d], requires grad
};

// Gathers rows `idx` of `t` as a differentiable leaf over the distinct offsets
// (so a row used several times gets one summed gradient, as PBG's sparse
// embedding gradient does); returns the rows in the order of idx.
torch::Tensor gather_rows(const model::model_desc& m, model::table& t, const torch::Tensor& idx, gathered& g) {
  auto [uniq, inv] = at::_unique(idx, /*sorted=*/true, /*return_inverse=*/true);
  auto leaf = t.embeddings.index_select(0, uniq);
  if (m.max_norm) {
    leaf = leaf.renorm(2, 0, *m.max_norm);
    // HOGWILD write (see the marked block in train_step): PBG's embedding
    // lookup with max_norm renormalises the stored rows too.
    t.embeddings.index_copy_(0, uniq, leaf);
  }
  leaf.requires_grad_(true);
  g.table = &t;
  g.uniq = uniq;
  g.leaf = leaf;
  return leaf.index_select(0, inv);
}

torch::Tensor negative_offsets(const model::side_negatives& n, std::int64_t count) {
  if (!n.enabled) return torch::zeros({0}, torch::kLong);
  if (n.all) return torch::arange(count, torch::kLong);
  return n.uniform.flatten();
}

struct op_leaf {
  std::string key;
  torch::Tensor leaf, idx;
};

struct worker_state {
  std::mt19937_64 rng;
  double lr = 0, relation_lr = 0;
};

// Rows [0, rows) of dropout stream `stream` of the batch with `seed`, as
// the 1-vs-all kernel draws them: [rows, d] of 0 and 1/(1 − p). Row r has
// key r·every + at (an operator's parameters: `every` of them per query).
torch::Tensor dropout_mask(std::uint64_t seed, dropout_stream stream, std::int64_t rows, std::int64_t d, double p,
                           std::uint64_t every = 1, std::uint64_t at = 0) {
  auto mask = torch::ones({rows, d}, torch::kFloat);
  float* x = mask.data_ptr<float>();
  for (std::int64_t r = 0; r < rows; ++r)
    dropout_row(x + r * d, x + r * d, static_cast<int>(d),
                dropout_key(seed, stream, static_cast<std::uint64_t>(r) * every + at), static_cast<float>(p));
  return mask;
}

// KvsAll's targets of one loss side for the reference path: [n, count], 1 at
// each edge's known answers other than its own entity `truth`.
torch::Tensor known_matrix(const std::span<const std::int64_t>* answers, const torch::Tensor& truth,
                           std::int64_t count) {
  const auto n = truth.size(0);
  auto y = torch::zeros({n, count}, torch::kFloat);
  auto acc = y.accessor<float, 2>();
  const auto* t = truth.data_ptr<std::int64_t>();
  for (std::int64_t i = 0; i < n; ++i)
    for (auto j : answers[i])
      if (j != t[i]) acc[i][j] = 1.0f;
  return y;
}

double train_step(const model::model_desc& m, bucket_tables& tables, model::shared_params& p,
                  const torch::Tensor& lo, const torch::Tensor& ro, const torch::Tensor& rel,
                  const torch::Tensor& weight, worker_state& ws, std::uint64_t dropout_seed,
                  const std::span<const std::int64_t>* const answers[2]) {
  const std::int64_t n = lo.size(0);
  const auto r0 = rel[0].item<std::int64_t>();
  const auto& rd = m.relations[static_cast<std::size_t>(r0)];
  auto& tl = tables.lhs[static_cast<std::size_t>(rd.lhs_type)];
  auto& tr = tables.rhs[static_cast<std::size_t>(rd.rhs_type)];
  const bool same = tl.embeddings.data_ptr() == tr.embeddings.data_ptr();
  const auto d = tl.embeddings.size(1);

  auto ln = model::draw_negatives(m, side::lhs, n, tl.count(), rd.all_negs, ws.rng);
  auto rn = model::draw_negatives(m, side::rhs, n, tr.count(), rd.all_negs, ws.rng);
  auto li = torch::cat({lo, negative_offsets(ln, tl.count())});
  auto ri = torch::cat({ro, negative_offsets(rn, tr.count())});

  std::vector<gathered> gs;
  torch::Tensor lrows, rrows;
  if (same) {
    gs.resize(1);
    auto rows = gather_rows(m, tl, torch::cat({li, ri}), gs[0]);
    lrows = rows.narrow(0, 0, li.size(0));
    rrows = rows.narrow(0, li.size(0), ri.size(0));
  } else {
    gs.resize(2);
    lrows = gather_rows(m, tl, li, gs[0]);
    rrows = gather_rows(m, tr, ri, gs[1]);
  }

  model::forward_inputs in;
  in.lhs_rows = lrows.narrow(0, 0, n);
  in.rhs_rows = rrows.narrow(0, 0, n);
  auto neg_rows = [&](const model::side_negatives& sn, const torch::Tensor& rows) -> torch::Tensor {
    if (!sn.enabled) return {};
    auto rest = rows.narrow(0, n, rows.size(0) - n);
    if (sn.all) return rest;
    return rest.view({sn.uniform.size(0), sn.uniform.size(1), d});
  };
  in.lhs_neg_rows = neg_rows(ln, lrows);
  in.rhs_neg_rows = neg_rows(rn, rrows);

  std::vector<std::pair<std::string, torch::Tensor>> globals;
  if (m.global_emb) {
    auto leaf_of = [&](std::int64_t type) {
      auto name = storage::global_embedding_name(m.entity_types[static_cast<std::size_t>(type)]);
      for (auto& [k, t] : globals)
        if (k == name) return t;
      auto leaf = p.values.at(name).detach().clone().requires_grad_(true);
      globals.emplace_back(name, leaf);
      return leaf;
    };
    in.lhs_global = leaf_of(rd.lhs_type);
    in.rhs_global = leaf_of(rd.rhs_type);
  }

  std::vector<op_leaf> ops;
  torch::Tensor rel_uniq, rel_inv;
  if (m.dynamic) std::tie(rel_uniq, rel_inv) = at::_unique(rel, true, true);
  for (side s : {side::lhs, side::rhs}) {
    if (!m.has_operator(s) || rd.op == model::op_kind::none) continue;
    auto& target = s == side::lhs ? in.lhs_op : in.rhs_op;
    (s == side::lhs ? in.lhs_kind : in.rhs_kind) = rd.op;
    for (const auto& [param, shape] : model::operator_params(rd.op, d)) {
      (void)shape;
      auto key = model::shared_params::stack_key(m, r0, s, param);
      const auto& stack = p.stacks.at(key);
      op_leaf o;
      o.key = key;
      if (m.dynamic) {
        o.leaf = stack.index_select(0, rel_uniq).requires_grad_(true);
        o.idx = rel_uniq;
        target[param] = o.leaf.index_select(0, rel_inv);
      } else {
        o.leaf = stack.narrow(0, 0, 1).clone().requires_grad_(true);
        o.idx = torch::zeros({1}, torch::kLong);
        target[param] = o.leaf;
      }
      ops.push_back(std::move(o));
    }
  }
  in.per_edge_params = m.dynamic;
  const auto device = tl.embeddings.device();
  auto mask = [&](dropout_stream s, std::int64_t rows, double rate) {
    return dropout_mask(dropout_seed, s, rows, d, rate).to(device);
  };
  if (rd.all_negs && m.query_dropout > 0) {
    in.lhs_query_mask = mask(dropout_stream::lhs_queries, n, m.query_dropout);
    in.rhs_query_mask = mask(dropout_stream::rhs_queries, n, m.query_dropout);
  }
  if (rd.all_negs && m.candidate_dropout > 0) {
    in.lhs_candidate_mask = mask(dropout_stream::lhs_candidates, tl.count(), m.candidate_dropout);
    in.rhs_candidate_mask = mask(dropout_stream::rhs_candidates, tr.count(), m.candidate_dropout);
  }
  if (rd.all_negs && (m.query_entity_dropout > 0 || m.relation_dropout > 0)) {
    // the lhs side's queries carry the rhs operator, the rhs side's the lhs
    // one (without dynamic relations the rhs one, moved onto them)
    in.lhs_query_entity_mask = mask(dropout_stream::lhs_query_entities, n, m.query_entity_dropout);
    in.rhs_query_entity_mask = mask(dropout_stream::rhs_query_entities, n, m.query_entity_dropout);
    auto* rhs_query_ops = m.dynamic ? &in.lhs_op : &in.rhs_op;
    for (auto [ops_of, masks, stream] :
         {std::tuple{&in.rhs_op, &in.lhs_query_op_mask, dropout_stream::lhs_query_relations},
          std::tuple{rhs_query_ops, &in.rhs_query_op_mask, dropout_stream::rhs_query_relations}}) {
      std::uint64_t k = 0;
      for (const auto& [param, shape] : model::operator_params(rd.op, d)) {
        (void)shape;
        if (!ops_of->contains(param)) continue;
        const auto width = ops_of->at(param).size(1);
        (*masks)[param] = dropout_mask(dropout_seed, stream, n, width, m.relation_dropout, 2, k++).to(device);
      }
    }
  }
  if (rd.all_negs && answers[0] != nullptr) {
    in.lhs_known = known_matrix(answers[0], lo, tl.count()).to(device);
    in.rhs_known = known_matrix(answers[1], ro, tr.count()).to(device);
  }

  auto f = model::forward(m, in, ln, rn, lo, ro);
  auto loss = model::batch_loss(m, f, weight, rd.weight);
  loss.backward();

  // ---- HOGWILD ------------------------------------------------------------------
  // The one place where workers write shared tables without locks: the entity
  // optimizer (row-wise or element-wise Adagrad) on the embeddings and state, element-wise Adagrad on the global
  // embeddings and relation parameters, through ATen's in-place index_add_
  // (plain float stores). Concurrent workers may interleave read-modify-write
  // on the same row and lose part of an update; as in PBG (and HOGWILD), this
  // race is accepted by design: it is rare (rows are sparse) and harmless to
  // convergence. The max_norm write-back in gather_rows() is the only other
  // such write. Thread sanitizer runs should exclude this function.
  {
    torch::NoGradGuard no_grad;
    for (auto& g : gs) {
      auto grad = g.leaf.grad();
      if (grad.defined()) model::entity_adagrad(*g.table, g.uniq, grad, ws.lr);
    }
    for (auto& [name, leaf] : globals) {
      auto grad = leaf.grad();
      if (grad.defined()) model::elementwise_adagrad(p.values.at(name), p.adagrad.at(name), {}, grad, ws.relation_lr);
    }
    for (auto& o : ops) {
      auto grad = o.leaf.grad();
      if (grad.defined())
        model::elementwise_adagrad(p.stacks.at(o.key), p.stack_adagrad.at(o.key), o.idx, grad, ws.relation_lr);
    }
  }
  // --------------------------------------------------------------------------------
  return loss.item<double>();
}

struct edge_view {
  const std::int64_t* lhs = nullptr;
  const std::int64_t* rhs = nullptr;
  const std::int64_t* rel = nullptr;
  const float* weight = nullptr;
};

// How a worker trains its batches: the reference path, the fused step, or
// the 1-vs-all step (which brings its own team of threads).
enum class step_kind { reference, fused, all_negs };

void run_worker(const model::model_desc& m, bucket_tables& tables, model::shared_params& p, const edge_view& ev,
                const known_answers* known, std::span<const std::int64_t> mine, std::int64_t batch_size,
                step_kind kind, all_negs_step* all_negs, worker_state ws, const std::atomic<bool>& stop,
                kernel_stats& out) {
  single_threaded_blas();
  fused_step step;
  // group by relation (dynamic relations: one group of mixed relation ids)
  const std::size_t num_groups = m.dynamic ? 1 : m.relations.size();
  std::vector<std::vector<std::int64_t>> groups(num_groups);
  for (auto e : mine) groups[m.dynamic ? 0 : static_cast<std::size_t>(ev.rel[e])].push_back(e);
  std::vector<std::size_t> next(num_groups, 0);
  std::vector<double> remaining(num_groups);
  for (std::size_t g = 0; g < num_groups; ++g) remaining[g] = static_cast<double>(groups[g].size());

  std::vector<std::int64_t> lo, ro, rl;
  std::vector<float> wt;
  std::vector<std::span<const std::int64_t>> answers[2];
  while (!stop.load(std::memory_order_relaxed)) {
    if (std::all_of(remaining.begin(), remaining.end(), [](double r) { return r == 0; })) break;
    std::discrete_distribution<std::size_t> pick(remaining.begin(), remaining.end());
    const auto g = pick(ws.rng);
    const auto take = std::min<std::size_t>(static_cast<std::size_t>(batch_size), groups[g].size() - next[g]);
    lo.clear(), ro.clear(), rl.clear(), wt.clear(), answers[0].clear(), answers[1].clear();
    for (std::size_t i = 0; i < take; ++i) {
      const auto e = groups[g][next[g] + i];
      lo.push_back(ev.lhs[e]);
      ro.push_back(ev.rhs[e]);
      rl.push_back(ev.rel[e]);
      if (ev.weight != nullptr) wt.push_back(ev.weight[e]);
      if (known != nullptr)
        for (int s = 0; s < 2; ++s) answers[s].push_back(known->of(s, e));
    }
    const std::span<const std::int64_t>* const batch_answers[2] = {known != nullptr ? answers[0].data() : nullptr,
                                                                   known != nullptr ? answers[1].data() : nullptr};
    next[g] += take;
    remaining[g] = static_cast<double>(groups[g].size() - next[g]);
    const auto k = static_cast<std::int64_t>(take);
    out.edges += k;
    out.batches += 1;
    // drawn by both paths alike, so that they train with the same masks
    const std::uint64_t dropout_seed = m.any_dropout() ? ws.rng() : 0;
    if (kind != step_kind::reference) {
      const batch_ref br{lo.data(), ro.data(), rl.data(), ev.weight != nullptr ? wt.data() : nullptr, k,
                         {batch_answers[0], batch_answers[1]}};
      out.loss += kind == step_kind::fused ? step(m, tables, p, br, ws.rng, ws.lr, ws.relation_lr)
                                           : (*all_negs)(m, tables, p, br, ws.lr, ws.relation_lr, dropout_seed);
      continue;
    }
    auto tensor = [&](std::vector<std::int64_t>& v) { return torch::from_blob(v.data(), {k}, torch::kLong); };
    torch::Tensor w;
    if (ev.weight != nullptr) w = torch::from_blob(wt.data(), {k}, torch::kFloat);
    out.loss += train_step(m, tables, p, tensor(lo), tensor(ro), tensor(rl), w, ws, dropout_seed, batch_answers);
  }
}

} // namespace

expected<kernel_stats> train_bucket(const model::model_desc& m, bucket_tables& tables, model::shared_params& params,
                                    const bucket_edges& edges, const kernel_options& options,
                                    const std::atomic<bool>& stop) {
  if (options.num_gpus > 0 && !torch::cuda::is_available())
    return fail("num_gpus = {} but this build of LibTorch has no CUDA support (or no GPU is visible); "
                "set num_gpus = 0 to train on the CPU",
                options.num_gpus);
  if (options.workers < 1) return fail("workers must be >= 1, got {}", options.workers);
  if (options.batch_size < 1) return fail("batch_size must be >= 1, got {}", options.batch_size);
  const auto start = std::chrono::steady_clock::now();
  kernel_stats total;
  const std::int64_t e = edges.size();
  if (e == 0) return total;

  auto lhs = edges.lhs.to(torch::kLong).contiguous();
  auto rhs = edges.rhs.to(torch::kLong).contiguous();
  auto rel = edges.rel.defined() ? edges.rel.to(torch::kLong).contiguous() : torch::zeros({e}, torch::kLong);
  torch::Tensor weight;
  if (edges.weight.defined()) weight = edges.weight.to(torch::kFloat).contiguous();
  if (rhs.size(0) != e || rel.size(0) != e || (weight.defined() && weight.size(0) != e))
    return fail("bucket edges: lhs, rhs, rel and weight must have the same length");
  edge_view ev{lhs.data_ptr<std::int64_t>(), rhs.data_ptr<std::int64_t>(), rel.data_ptr<std::int64_t>(),
               weight.defined() ? weight.data_ptr<float>() : nullptr};

  // validate every offset and relation id before touching anything
  const auto num_rel = static_cast<std::int64_t>(m.relations.size());
  for (std::int64_t i = 0; i < e; ++i) {
    const auto r = ev.rel[i];
    if (r < 0 || r >= num_rel) return fail("edge {}: relation id {} out of range [0, {})", i, r, num_rel);
    const auto& rd = m.relations[static_cast<std::size_t>(r)];
    const auto lt = static_cast<std::size_t>(rd.lhs_type), rt = static_cast<std::size_t>(rd.rhs_type);
    if (lt >= tables.lhs.size() || !tables.lhs[lt].embeddings.defined())
      return fail("relation '{}' needs the lhs table of type '{}', which is not loaded", rd.name, m.entity_types[lt]);
    if (rt >= tables.rhs.size() || !tables.rhs[rt].embeddings.defined())
      return fail("relation '{}' needs the rhs table of type '{}', which is not loaded", rd.name, m.entity_types[rt]);
    if (ev.lhs[i] < 0 || ev.lhs[i] >= tables.lhs[lt].count())
      return fail("edge {}: lhs offset {} out of range [0, {})", i, ev.lhs[i], tables.lhs[lt].count());
    if (ev.rhs[i] < 0 || ev.rhs[i] >= tables.rhs[rt].count())
      return fail("edge {}: rhs offset {} out of range [0, {})", i, ev.rhs[i], tables.rhs[rt].count());
  }

  // Models whose relations all have all_negs take the 1-vs-all kernel, the
  // others the fused one, where they cover the model.
  const bool every_all_negs = std::all_of(m.relations.begin(), m.relations.end(), [](const auto& r) { return r.all_negs; });
  const auto why_not = every_all_negs ? all_negs_unsupported_reason(m, tables) : fused_unsupported_reason(m, tables);
  if (options.path == kernel_path::fused && !why_not.empty())
    return fail("the fused CPU kernel cannot train this model ({}); use the reference path", why_not);
  const bool fused = options.num_gpus == 0 && why_not.empty() && options.path != kernel_path::reference;
  total.fused = fused;
  const auto kind = !fused ? step_kind::reference : every_all_negs ? step_kind::all_negs : step_kind::fused;

  // KvsAll: the known answers of every query, among this bucket's edges
  std::optional<known_answers> known;
  if (m.known_targets) known = known_answers::build(ev.lhs, ev.rhs, ev.rel, e);

  std::vector<std::int64_t> perm(static_cast<std::size_t>(e));
  std::iota(perm.begin(), perm.end(), 0);
  std::mt19937_64 shuffle_rng(options.seed);
  std::shuffle(perm.begin(), perm.end(), shuffle_rng);

  // The 1-vs-all step trains one batch at a time with all the threads (each
  // batch touches every row: HOGWILD workers would collide on all of them).
  const auto w = kind == step_kind::all_negs ? 1 : std::min<std::int64_t>(options.workers, e);
  std::optional<thread_team> team;
  std::optional<all_negs_step> all_negs;
  if (kind == step_kind::all_negs) {
    if (m.bf16_products && !bf16_products_available()) {
      static std::once_flag warned;
      std::call_once(warned, [] {
        spdlog::warn("all_negs_precision = \"bfloat16\": this CPU has no AVX512-BF16 (or oneDNN is not loaded), so "
                     "the 1-vs-all products run in float32");
      });
    }
    team.emplace(static_cast<int>(options.workers), single_threaded_blas);
    all_negs.emplace(*team, options.score_tile_floats);
  }
  std::vector<kernel_stats> stats(static_cast<std::size_t>(w));
  std::vector<std::string> errors(static_cast<std::size_t>(w));
  std::vector<std::thread> threads;
  for (std::int64_t i = 0; i < w; ++i) {
    const auto b = perm.begin() + i * e / w, en = perm.begin() + (i + 1) * e / w;
    std::span<const std::int64_t> mine(&*b, static_cast<std::size_t>(en - b));
    worker_state ws;
    std::seed_seq seq{options.seed, static_cast<std::uint64_t>(i) + 1};
    ws.rng.seed(seq);
    ws.lr = options.lr.value_or(m.lr);
    ws.relation_lr = options.relation_lr.value_or(m.relation_lr);
    const auto slot = static_cast<std::size_t>(i);
    threads.emplace_back([&, mine, ws, slot] {
      try {
        run_worker(m, tables, params, ev, known ? &*known : nullptr, mine, options.batch_size, kind,
                   all_negs ? &*all_negs : nullptr, ws, stop, stats[slot]);
      } catch (const std::exception& ex) {
        errors[slot] = ex.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (std::size_t i = 0; i < stats.size(); ++i) {
    if (!errors[i].empty()) return fail("bucket kernel worker {} failed: {}", i, errors[i]);
    total.loss += stats[i].loss;
    total.edges += stats[i].edges;
    total.batches += stats[i].batches;
  }
  total.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return total;
}

expected<kernel_stats> train_bucket(const model::model_desc& m, model::table& lhs, model::table& rhs,
                                    model::shared_params& params, const bucket_edges& edges,
                                    const kernel_options& options, const std::atomic<bool>& stop) {
  bucket_tables t;
  t.lhs.assign(m.entity_types.size(), lhs);
  t.rhs.assign(m.entity_types.size(), rhs);
  return train_bucket(m, t, params, edges, options, stop);
}

} // namespace abg::train
