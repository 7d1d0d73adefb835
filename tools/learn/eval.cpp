// `abg eval CONFIG [--edge-path PATH] [--filtered] [--per-relation] [--json]`
#include <algorithm>
#include <map>
#include <thread>

#include <nlohmann/json.hpp>

#include "abg/eval/filtered.h"
#include "abg/eval/metrics.h"
#include "abg/eval/model_score.h"
#include "abg/eval/ranking.h"
#include "abg/eval/sampled.h"
#include "abg/model/model.h"
#include "abg/storage/bucket_file.h"
#include "abg/storage/checkpoint.h"
#include "abg/storage/edge_manifest.h"
#include "abg/storage/entity_store.h"
#include "tools/config_options.h"
#include "tools/learn/commands.h"
#include "tools/learn/loaded_model.h"

namespace abg::tools {

namespace fs = std::filesystem;

namespace {

struct eval_args {
  config_args config;
  std::string edge_path;
  bool filtered = false;
  bool per_relation = false;
  bool json = false;
  std::optional<std::int64_t> version;
};

int threads_of(const config& cfg) {
  return static_cast<int>(cfg.workers.value_or(std::max(1u, std::thread::hardware_concurrency())));
}

expected<eval::eval_stats> run_filtered(const config& cfg, const loaded_model& lm, const eval::entity_space& space,
                                        const fs::path& edge_path) {
  std::vector<fs::path> known_paths(cfg.edge_paths.begin(), cfg.edge_paths.end());
  if (std::none_of(known_paths.begin(), known_paths.end(),
                   [&](auto& p) { return fs::weakly_canonical(p) == fs::weakly_canonical(edge_path); }))
    known_paths.push_back(edge_path);
  auto known = eval::load_known_triples(known_paths, space, &lm.meta.id);
  if (!known)
    return std::unexpected(known.error());
  auto test = eval::read_edge_path(edge_path, space, &lm.meta.id);
  if (!test)
    return std::unexpected(test.error());
  // Global numbering: each type's partitions back to back, read from their
  // mapped files a partition at a time (never a copy of a whole type).
  auto score = eval::model_score(lm.desc, lm.params, [&](std::int64_t rel, eval::side s, const torch::Tensor& ids) {
    return lm.rows(lm.desc.entity_types[space.type_of(rel, s)], ids);
  });
  eval::filtered_options options;
  options.threads = threads_of(cfg);
  std::int64_t largest = 0;
  for (const auto& [key, table] : lm.tables)
    largest = std::max(largest, table.size(0));
  options.batch_size = eval::filtered_batch_size(largest, std::size_t{256} << 20, cfg.batch_size);
  options.rank_lhs = !cfg.disable_lhs_negs;
  options.rank_rhs = !cfg.disable_rhs_negs;
  auto result = eval::filtered_rank(*test, *known, space, score, options);
  if (!result)
    return std::unexpected(result.error());
  return result->stats;
}

expected<eval::eval_stats> run_sampled(const config& cfg, const loaded_model& lm, const eval::entity_space& space,
                                       const fs::path& edge_path) {
  auto manifest = storage::read_edge_manifest(edge_path);
  if (!manifest)
    return std::unexpected(manifest.error());
  eval::sampled_options options;
  options.batch_size = cfg.batch_size;
  options.num_batch_negs = cfg.num_batch_negs;
  options.num_uniform_negs = cfg.num_uniform_negs;
  for (auto& r : lm.desc.relations)
    options.all_negs.push_back(r.all_negs);
  options.rank_lhs = !cfg.disable_lhs_negs;
  options.rank_rhs = !cfg.disable_rhs_negs;
  options.threads = threads_of(cfg);
  options.slices = options.threads; // PBG splits a bucket among its `workers`
  options.seed = static_cast<std::uint64_t>(cfg.seed.value_or(0));
  eval::eval_stats total;
  for (auto& b : manifest->buckets) {
    auto reader = storage::bucket_reader::open(edge_path / b.file, &lm.meta.id);
    if (!reader)
      return std::unexpected(reader.error());
    auto columns = eval::read_bucket_columns(*reader);
    auto table = [&](std::int64_t rel, eval::side s) {
      const auto& type = lm.desc.entity_types[space.type_of(rel, s)];
      auto parts = lm.meta.type(type)->num_partitions();
      auto p = parts > 1 ? (s == eval::side::lhs ? b.lhs : b.rhs) : 0;
      return lm.tables.at({type, p});
    };
    auto result = eval::sampled_rank_bucket(columns.view(), eval::bucket_partition_counts(space, b.lhs, b.rhs),
                                            eval::model_score(lm.desc, lm.params, eval::rows_of(table)),
                                            eval::model_pair_score(lm.desc, lm.params, eval::rows_of(table)), options);
    if (!result)
      return std::unexpected(result.error());
    total.merge(result->stats);
  }
  return total;
}

void run(const eval_args& args, int& exit_code) {
  auto cfg = load_config_or_report(args.config);
  if (!cfg) {
    exit_code = 1;
    return;
  }
  auto report = [&](const error& e) {
    fmt::print(stderr, "error: {}\n", e.message);
    exit_code = 1;
  };
  if (cfg->edge_paths.empty() && args.edge_path.empty())
    return report(error{"no --edge-path given and the config has no edge_paths"});
  fs::path edge_path = args.edge_path.empty() ? fs::path(cfg->edge_paths.back()) : fs::path(args.edge_path);
  torch::NoGradGuard no_grad;
  auto lm = load_model(*cfg, args.version);
  if (!lm)
    return report(lm.error());
  auto space = eval::entity_space::create(*cfg, lm->meta);
  if (!space)
    return report(space.error());
  fmt::print(stderr, "evaluating {} with checkpoint version {} ({} ranking)\n", edge_path.string(), lm->version,
             args.filtered ? "filtered" : "sampled");
  auto start = std::chrono::steady_clock::now();
  auto stats = args.filtered ? run_filtered(*cfg, *lm, *space, edge_path) : run_sampled(*cfg, *lm, *space, edge_path);
  if (!stats)
    return report(stats.error());
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (args.json) {
    fmt::print("{}\n", stats->to_json(args.per_relation, lm->meta.relation_names).dump());
  } else {
    fmt::print("{}\n", stats->overall.to_string());
    if (args.per_relation)
      for (auto& [rel, m] : stats->per_relation)
        fmt::print("  {}: {}\n",
                   rel < static_cast<std::int64_t>(lm->meta.relation_names.size())
                     ? lm->meta.relation_names[static_cast<std::size_t>(rel)]
                     : std::to_string(rel),
                   m.to_string());
  }
  fmt::print(stderr, "evaluated {} edges in {:.1f} s\n", stats->overall.count, seconds);
}

} // namespace

void register_eval_command(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<eval_args>();
  auto* cmd = app.add_subcommand(
    "eval", "Evaluate the latest checkpoint on an edge path. Default: sampled ranking exactly as PBG's "
            "torchbiggraph_eval (the config's num_batch_negs / num_uniform_negs, bucket by bucket). --filtered: "
            "rank against every entity of the type with the known true triples of all edge paths filtered out "
            "(the FB15k-237 / WN18RR protocol). Rank = 1 + number of negatives scoring >= the positive.");
  add_config_args(*cmd, args->config);
  cmd->add_option("--edge-path", args->edge_path,
                  "Edge path directory to evaluate (absolute or relative to the current directory); default: the "
                  "last entry of edge_paths");
  cmd->add_flag("--filtered", args->filtered, "Filtered ranking against every entity of the type");
  cmd->add_flag("--per-relation", args->per_relation, "Also report the metrics of each relation");
  cmd->add_flag("--json", args->json,
                "Print exactly one JSON object on stdout (keys mrr, mean_rank, hits@1, hits@3, hits@10, hits@50, auc, "
                "count); logs go to stderr");
  cmd->add_option("--version", args->version, "Checkpoint version to evaluate (default: the latest)");
  cmd->callback([args, &exit_code] { run(*args, exit_code); });
}

} // namespace abg::tools
