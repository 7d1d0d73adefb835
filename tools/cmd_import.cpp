// `abg import`: edge lists -> entity dictionaries + bucket files (abg/import.h).
#include <cstdio>

#include "abg/import.h"
#include "tools/column_options.h"
#include "tools/commands.h"
#include "tools/config_options.h"
#include "tools/progress.h"

namespace abg::tools {

namespace {

struct import_args {
  config_args config;
  std::vector<std::string> inputs;
  import_options options;
  column_args columns;
};

void run(import_args& args) {
  auto cfg = load_config_or_report(args.config);
  if (!cfg) {
    exit_code() = 1;
    return;
  }
  if (auto ok = finish_columns(args.options, args.columns); !ok) {
    fmt::print(stderr, "error: {}\n", ok.error().message);
    exit_code() = 1;
    return;
  }
  args.options.skip_header = args.columns.skip_header;
  args.options.inputs.assign(args.inputs.begin(), args.inputs.end());
  progress_display display("edges");
  import_callbacks callbacks;
  callbacks.warning = [&](std::string_view message) {
    display.finish();
    fmt::print(stderr, "warning: {}\n", message);
  };
  callbacks.progress = [&](std::string_view phase, std::uint64_t edges, double seconds, double done) {
    display.update(phase, edges, seconds, done);
  };
  auto report = run_import(*cfg, args.options, callbacks);
  display.finish();
  if (!report) {
    fmt::print(stderr, "error: {}\n", report.error().message);
    exit_code() = 1;
    return;
  }
  auto& r = *report;
  fmt::print(stderr,
             "imported {} edges from {} file(s) into {} bucket(s) in {:.2f} s ({} edges/s); {} entities ({} new), "
             "{} relation type(s); {} malformed line(s) skipped, {} edge(s) dropped by min counts\n",
             r.edges, args.inputs.size(), r.buckets, r.seconds,
             human_count(r.seconds > 0 ? static_cast<double>(r.lines) / r.seconds : 0), r.total_entities,
             r.new_entities, r.relations, r.malformed, r.dropped_min_count);
}

} // namespace

void register_import_command(CLI::App& app) {
  auto args = std::make_shared<import_args>();
  auto* cmd = app.add_subcommand(
    "import", "Import edge lists (TSV/CSV, plain or gzip) into the config's entity_path (dictionaries) and "
              "edge_paths (bucket files + manifest.json).");
  cmd->footer("One input file per entry of edge_paths, in order. Importing into an existing entity path extends its "
              "dictionaries (existing ids never move; new entities go to the least-filled partitions); importing "
              "into an edge path that already has buckets replaces them. Malformed lines are counted and the first "
              "few reported with file and line; --strict makes the first one fatal.");
  add_config_args(*cmd, args->config);
  cmd->add_option("edge_files", args->inputs, "Edge list files, one per edge_paths entry")->required()->check(
    CLI::ExistingFile);
  add_column_args(*cmd, args->options, args->columns);
  cmd->add_option("--weight-col", args->options.weight_col, "0-based column of a float edge weight (kept as float32)");
  cmd->add_flag("--strict", args->options.strict, "Stop at the first malformed line instead of skipping it");
  cmd->add_option("--entity-min-count", args->options.entity_min_count,
                  "Drop new entities seen fewer times than this (and their edges)")
    ->capture_default_str();
  cmd->add_option("--relation-type-min-count", args->options.relation_type_min_count,
                  "With dynamic_relations, drop relation types seen fewer times than this (and their edges)")
    ->capture_default_str();
  cmd->callback([args] { run(*args); });
}

} // namespace abg::tools
