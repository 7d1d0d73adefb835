// `abg generate`: writes a synthetic multi-relation graph with skewed
// degrees as head<TAB>relation<TAB>tail lines (runtime/generate; the model
// of the degrees is in docs/generate.md).

#include "tools/commands.h"

#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <fmt/core.h>

#include "abg/generate/direct.h"
#include "abg/generate/graph.h"
#include "tools/config_options.h"
#include "tools/progress.h"

namespace abg::tools {

namespace {

struct generate_options {
  std::string output;
  std::string direct; // a config: write its dataset instead of a TSV
  std::vector<std::string> overrides;
  generate::graph_spec spec;
  unsigned threads = 0;
};

// The progress display of one write, fed with the edges done so far.
class edge_progress {
public:
  explicit edge_progress(std::uint64_t total) : total_(static_cast<double>(total)) {}
  void operator()(std::string_view phase, std::uint64_t edges) {
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    display_.update(phase, edges, seconds, static_cast<double>(edges) / total_);
  }
  void finish() { display_.finish(); }

private:
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  double total_;
  progress_display display_{"edges"};
};

// "wrote E edges (N entities, R relations, power law A, seed S)": the start of either summary.
std::string wrote(std::uint64_t edges, const generate::graph_spec& s) {
  return fmt::format("abg generate: wrote {} edges ({} entities, {} relations, power law {}, seed {})", edges,
                     s.entities, s.relations, s.power_law, s.seed);
}

std::string rate(std::uint64_t edges, double seconds, unsigned threads) {
  return fmt::format("{} edges/s, {} threads", human_count(static_cast<double>(edges) / std::max(seconds, 1e-9)),
                     threads);
}

int fail_with(const error& e) {
  fmt::print(stderr, "abg generate: {}\n", e.message);
  return 1;
}

int run_direct(const generate_options& options, unsigned threads) {
  auto cfg = load_config_or_report({options.direct, options.overrides});
  if (!cfg)
    return 1;
  if (auto ok = generate::check_direct(*cfg, options.spec); !ok)
    return fail_with(ok.error());
  edge_progress progress(options.spec.edges);
  auto report = generate::write_dataset(*cfg, options.spec, threads, std::ref(progress));
  progress.finish();
  if (!report)
    return fail_with(report.error());
  fmt::print(stderr, "{} into entity path {} and edge path {} ({} buckets) in {:.2f} s ({})\n",
             wrote(report->edges, options.spec), cfg->entity_path, cfg->edge_paths.front(), report->buckets,
             report->seconds, rate(report->edges, report->seconds, threads));
  return 0;
}

int run_generate(const generate_options& options) {
  if (auto ok = generate::check(options.spec); !ok)
    return fail_with(ok.error());
  const auto threads = options.threads > 0 ? options.threads : std::max(1u, std::thread::hardware_concurrency());
  if (options.output.empty() == options.direct.empty()) {
    fmt::print(stderr, "abg generate: give either OUT.tsv or --direct CONFIG\n");
    return 1;
  }
  if (!options.direct.empty())
    return run_direct(options, threads);
  edge_progress progress(options.spec.edges);
  auto report = generate::write_tsv(options.spec, options.output, threads,
                                    [&](std::uint64_t edges) { progress("generating", edges); });
  progress.finish();
  if (!report)
    return fail_with(report.error());
  fmt::print(stderr, "{} to {}: {:.1f} MB in {:.2f} s ({})\n", wrote(report->edges, options.spec),
             options.output == "-" ? std::string("standard output") : "'" + options.output + "'",
             static_cast<double>(report->bytes) / 1e6, report->seconds, rate(report->edges, report->seconds, threads));
  return 0;
}

} // namespace

void register_generate_command(CLI::App& app) {
  auto options = std::make_shared<generate_options>();
  auto* cmd = app.add_subcommand(
      "generate", "Write a synthetic multi-relation graph with skewed (Zipf) degrees as head<TAB>relation<TAB>tail "
                  "lines, for scale tests.");
  cmd->footer(
      "Each edge draws its head and its tail independently from one Zipf distribution over entity\n"
      "ranks, P(rank k) ~ k^-ALPHA (a tail equal to its head is drawn again), and its relation from\n"
      "a Zipf distribution over relation ranks with the same exponent; a seeded permutation\n"
      "scatters the ranks over entity ids. So the number of entities with degree >= d falls\n"
      "like d^(-1/ALPHA) (ALPHA = 0.8: a degree power law with exponent 2.25). Entities are\n"
      "named e{id}, relations r{id}; an entity that no edge draws does not appear. Duplicate\n"
      "edges are possible, as in real edge lists. The output depends only on the options and\n"
      "the seed, never on --threads. See docs/generate.md.\n"
      "--direct CONFIG writes the graph straight into the config's (new) entity path and its one\n"
      "edge path, in the importer's formats: every entity id in the dictionary, partition p holding\n"
      "a contiguous range of the (already shuffled) ids.\n"
      "Example: abg generate graph.tsv --entities 1000000 --edges 50000000 --relations 20");
  cmd->add_option("output", options->output, "TSV file to write (complete or not at all), or '-' for standard output")
      ->type_name("OUT.tsv");
  cmd->add_option("--direct", options->direct,
                  "instead of a TSV, write the imported dataset (dictionaries and buckets) of this config")
      ->type_name("CONFIG")
      ->check(CLI::ExistingFile);
  cmd->add_option("-p,--param", options->overrides, "override a key of the --direct config (KEY=VALUE, repeatable)")
      ->allow_extra_args(false)
      ->type_name("KEY=VALUE");
  cmd->add_option("--entities", options->spec.entities, "number of entities (ids 0..N-1)")
      ->required()
      ->type_name("N");
  cmd->add_option("--edges", options->spec.edges, "number of edges")->required()->type_name("E");
  cmd->add_option("--relations", options->spec.relations, "number of relations")
      ->type_name("R")
      ->capture_default_str();
  cmd->add_option("--power-law", options->spec.power_law, "Zipf exponent of entity and relation ranks (0: uniform)")
      ->type_name("ALPHA")
      ->capture_default_str();
  cmd->add_option("--seed", options->spec.seed, "random seed")->type_name("S")->capture_default_str();
  cmd->add_option("--threads", options->threads, "generating threads (default: every core)")->type_name("T");
  cmd->callback([options] { exit_code() = run_generate(*options); });
}

} // namespace abg::tools
