#include "runtime/train/kernel_rate.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <random>
#include <thread>
#include <vector>

#include "abg/model/kernel.h"
#include "abg/model/model.h"

namespace abg::train {

namespace {

using clock_type = std::chrono::steady_clock;

// `count` random edges: relation ids uniform over the model's, offsets
// uniform over each relation's tables.
bucket_edges random_edges(const model::model_desc& m, const std::vector<std::int64_t>& rows, std::int64_t count,
                          std::mt19937_64& rng) {
  std::vector<std::int64_t> lhs(static_cast<std::size_t>(count)), rhs(lhs.size()), rel(lhs.size());
  std::uniform_int_distribution<std::int64_t> pick_rel(0, static_cast<std::int64_t>(m.relations.size()) - 1);
  for (std::size_t i = 0; i < lhs.size(); ++i) {
    rel[i] = pick_rel(rng);
    const auto& r = m.relations[static_cast<std::size_t>(rel[i])];
    lhs[i] = std::uniform_int_distribution<std::int64_t>(0, rows[static_cast<std::size_t>(r.lhs_type)] - 1)(rng);
    rhs[i] = std::uniform_int_distribution<std::int64_t>(0, rows[static_cast<std::size_t>(r.rhs_type)] - 1)(rng);
  }
  auto tensor = [](std::vector<std::int64_t>& v) {
    return torch::from_blob(v.data(), {static_cast<std::int64_t>(v.size())}, torch::kInt64).clone();
  };
  return {tensor(lhs), tensor(rhs), tensor(rel), {}};
}

} // namespace

expected<kernel_rate> measure_kernel_rate(const config& cfg, const std::map<std::string, std::int64_t>& rows,
                                          std::int64_t relation_ids, std::int64_t bucket_edges, double seconds) {
  if (seconds <= 0) return fail("a short run of the kernel needs a positive duration, not {} s", seconds);
  auto m = model::model_desc::from(cfg, cfg.dynamic_relations ? std::max<std::int64_t>(1, relation_ids) : 0);
  if (!m) return std::unexpected(m.error());
  const auto types = m->entity_types.size();
  std::vector<bool> used(types, false);
  for (const auto& r : m->relations) {
    used[static_cast<std::size_t>(r.lhs_type)] = true;
    used[static_cast<std::size_t>(r.rhs_type)] = true;
  }
  kernel_rate out;
  // 1-vs-all scores every row of the table: its cost per edge grows with the rows.
  double all_negs_scale = 1.0;
  std::vector<std::int64_t> table_rows(types, 0);
  bucket_tables tables;
  tables.lhs.resize(types);
  tables.rhs.resize(types);
  for (std::size_t t = 0; t < types; ++t) {
    if (!used[t]) continue;
    const auto& name = m->entity_types[t];
    auto it = rows.find(name);
    if (it == rows.end() || it->second < 2)
      return fail("entity type '{}' has {} rows in its largest partition: a short run of the kernel needs at least 2 "
                  "(import the graph, or give --entities)",
                  name, it == rows.end() ? 0 : it->second);
    const auto dim = m->dims[t];
    const auto width = m->state_width(static_cast<std::int64_t>(t));
    const auto row_bytes = (dim + width) * static_cast<std::int64_t>(sizeof(float));
    const auto n = std::clamp<std::int64_t>(max_rate_table_bytes / row_bytes, 2, it->second);
    if (n < it->second) {
      out.capped = true;
      for (const auto& r : m->relations)
        if (r.all_negs && (r.lhs_type == static_cast<std::int64_t>(t) || r.rhs_type == static_cast<std::int64_t>(t)))
          all_negs_scale = std::min(all_negs_scale, static_cast<double>(n) / static_cast<double>(it->second));
    }
    table_rows[t] = n;
    auto table = model::init_table(n, dim, m->init_scale, 1 + t, width);
    // One table for both sides, as in a bucket (i, i).
    tables.lhs[t] = table;
    tables.rhs[t] = table;
  }
  auto params = model::shared_params::init(*m);
  kernel_options options;
  options.workers = cfg.workers.value_or(std::max<std::int64_t>(1, std::thread::hardware_concurrency()));
  options.batch_size = cfg.batch_size;
  options.num_gpus = cfg.num_gpus;
  out.workers = options.workers;
  std::mt19937_64 rng(static_cast<std::uint64_t>(cfg.seed.value_or(0)) ^ 0x6b65726e656cULL);
  const std::atomic<bool> stop{false};

  // The warm-up pass: a few batches per worker; without a bucket size it
  // sizes the timed passes (about 0.5 s each).
  const auto first = std::max<std::int64_t>(cfg.batch_size * options.workers * 4, 10000);
  auto edges = random_edges(*m, table_rows, first, rng);
  auto t0 = clock_type::now();
  auto warm = train_bucket(*m, tables, params, edges, options, stop);
  if (!warm) return std::unexpected(warm.error());
  const double warm_seconds = std::chrono::duration<double>(clock_type::now() - t0).count();
  const auto pass =
    bucket_edges > 0
      ? std::min<std::int64_t>(bucket_edges, 20'000'000)
      : std::clamp<std::int64_t>(
          static_cast<std::int64_t>(static_cast<double>(first) * 0.5 / std::max(warm_seconds, 1e-6)), first,
          std::int64_t{20'000'000});
  edges = random_edges(*m, table_rows, pass, rng);
  while (out.seconds < seconds) {
    options.seed = rng();
    t0 = clock_type::now();
    auto s = train_bucket(*m, tables, params, edges, options, stop);
    if (!s) return std::unexpected(s.error());
    out.seconds += std::chrono::duration<double>(clock_type::now() - t0).count();
    out.edges += s->edges;
  }
  out.edges_per_second = static_cast<double>(out.edges) / out.seconds * all_negs_scale;
  return out;
}

} // namespace abg::train
