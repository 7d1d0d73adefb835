// How much of the machine's matrix-product speed the 1-vs-all kernel uses:
// one large plain sgemm (LibTorch's mm, on the same BLAS, with the same
// number of threads) against train_bucket on the shipped FB15k-237 1-vs-all
// recipe (config/fb15k237-sota.toml: ComplEx, dynamic relations, softmax
// over every entity) at FB15k-237's shape, in one invocation. The kernel's
// figure counts only its three products per batch and side (2·B·N·d flops
// each) over its whole time, so it is a lower bound of the speed of its
// products.
//
//   build/all_negs_gemm [--config FILE] [--entities N] [--dim D] [--batch B] [--batches K] [--threads W] [--gemm M]
#include <chrono>
#include <optional>
#include <random>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "abg/config.h"
#include "abg/model/kernel.h"

using namespace abg;

namespace {

double seconds_of(const std::function<void()>& f) {
  const auto t0 = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

} // namespace

int main(int argc, char** argv) {
  std::string config_file = "config/fb15k237-sota.toml";
  std::int64_t entities = 14541, relations = 237, batches = 30, threads = 2, gemm = 4096;
  std::optional<std::int64_t> dim_option, batch_option;
  CLI::App app{"1-vs-all kernel: matrix-product speed against one large plain sgemm"};
  app.add_option("--config", config_file, "the model's config (every relation with all_negs)");
  app.add_option("--entities", entities, "entities of the partition (FB15k-237: 14541)");
  app.add_option("--relations", relations, "relation ids with dynamic_relations (FB15k-237: 237)");
  app.add_option("--dim", dim_option, "embedding dimension (default: the config's)");
  app.add_option("--batch", batch_option, "batch_size (default: the config's)");
  app.add_option("--batches", batches, "batches trained");
  app.add_option("--threads", threads, "threads (workers) of both measures");
  app.add_option("--gemm", gemm, "side of the plain square sgemm");
  CLI11_PARSE(app, argc, argv);

  // The plain product: the best of 3, LibTorch's intra-op threads = W.
  at::set_num_threads(static_cast<int>(threads));
  auto a = torch::randn({gemm, gemm}), b = torch::randn({gemm, gemm});
  auto c = torch::mm(a, b); // warm-up
  double plain = 1e30;
  for (int i = 0; i < 3; ++i) plain = std::min(plain, seconds_of([&] { c = torch::mm(a, b); }));
  const double plain_flops = 2.0 * static_cast<double>(gemm) * static_cast<double>(gemm) * static_cast<double>(gemm);

  std::vector<std::string> overrides;
  if (dim_option) overrides.push_back(fmt::format("dimension={}", *dim_option));
  if (batch_option) overrides.push_back(fmt::format("batch_size={}", *batch_option));
  auto loaded = load_config(config_file, overrides);
  if (!loaded) {
    fmt::print(stderr, "all_negs_gemm: {}\n", loaded.error().message);
    return 1;
  }
  const auto& cfg = loaded->value;
  const std::int64_t dim = cfg.dimension, batch = cfg.batch_size;
  auto m = model::model_desc::from(cfg, relations);
  if (!m) {
    fmt::print(stderr, "all_negs_gemm: {}\n", m.error().message);
    return 1;
  }
  const auto n = batch * batches;
  std::mt19937_64 rng(1);
  std::uniform_int_distribution<std::int64_t> ent(0, entities - 1), rel(0, relations - 1);
  std::vector<std::int64_t> l(static_cast<std::size_t>(n)), rh(l.size()), t(l.size());
  for (std::size_t i = 0; i < l.size(); ++i) l[i] = ent(rng), rh[i] = ent(rng), t[i] = rel(rng);
  train::bucket_edges edges;
  edges.lhs = torch::tensor(l);
  edges.rhs = torch::tensor(rh);
  edges.rel = torch::tensor(t);
  auto tab = model::init_table(entities, dim, 1e-3, m->state_width(0));
  auto params = model::shared_params::init(*m);
  train::kernel_options o;
  o.workers = threads;
  o.batch_size = batch;
  o.path = train::kernel_path::fused;
  std::atomic<bool> stop{false};
  expected<train::kernel_stats> s;
  const double kernel = seconds_of([&] { s = train::train_bucket(*m, tab, tab, params, edges, o, stop); });
  if (!s) {
    fmt::print(stderr, "all_negs_gemm: {}\n", s.error().message);
    return 1;
  }
  // Three products per batch and side; a thread whose entities do not fit in
  // one tile computes the scores twice under the softmax.
  const auto per_thread = (entities + threads - 1) / threads;
  const bool recompute = per_thread * batch > o.score_tile_floats;
  const double products = (recompute ? 4.0 : 3.0) * 2.0 * static_cast<double>(batches);
  const double kernel_flops = products * 2.0 * static_cast<double>(batch) * static_cast<double>(entities) *
                              static_cast<double>(dim);
  const double plain_rate = plain_flops / plain / 1e9, kernel_rate = kernel_flops / kernel / 1e9;
  fmt::print("all_negs_gemm: plain {}x{} sgemm, {} threads: {:.1f} GFLOP/s; 1-vs-all kernel ({} entities, d = {}, "
             "B = {}, {} batches, {} edges/s): {:.1f} GFLOP/s in its products over its whole time = {:.0f}% of the "
             "plain sgemm\n",
             gemm, gemm, threads, plain_rate, entities, dim, batch, batches,
             static_cast<std::int64_t>(static_cast<double>(n) / kernel), kernel_rate, 100.0 * kernel_rate / plain_rate);
  return 0;
}
