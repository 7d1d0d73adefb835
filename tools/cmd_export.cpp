// `abg export`: a committed checkpoint -> TSV (PBG's layout) or .npy files (abg/storage/export.h).
#include "abg/storage/export.h"
#include "tools/commands.h"
#include "tools/config_options.h"

namespace abg::tools {

namespace {

struct export_args {
  config_args config;
  storage::export_options options;
  std::string format = "tsv";
  std::int64_t version = 0;
};

void run(export_args& args, bool version_given) {
  auto cfg = load_config_or_report(args.config);
  if (!cfg) {
    exit_code() = 1;
    return;
  }
  args.options.format = args.format == "npy" ? storage::export_format::npy : storage::export_format::tsv;
  if (version_given)
    args.options.version = args.version;
  auto summary = storage::export_checkpoint(*cfg, args.options);
  if (!summary) {
    fmt::print(stderr, "error: {}\n", summary.error().message);
    exit_code() = 1;
    return;
  }
  fmt::print(stderr, "exported checkpoint version {}: {} entities, {} relation parameter(s) into {} file(s)\n",
             summary->version, summary->entities, summary->relation_parameters, summary->files.size());
  for (auto& f : summary->files)
    fmt::print(stderr, "  {}\n", f.string());
}

} // namespace

void register_export_command(CLI::App& app) {
  auto args = std::make_shared<export_args>();
  auto* cmd = app.add_subcommand(
    "export", "Export a committed checkpoint of the config's checkpoint_path, with the entity names of its "
              "entity_path, as TSV (PyTorch-BigGraph's layout) or as NumPy .npy files.");
  cmd->footer(
    "tsv: --entities-output (default entities.tsv) holds one line per entity, name<TAB>v1<TAB>...; "
    "--relation-types-output (default relation_types.tsv) one line per relation operator parameter, "
    "name<TAB>side<TAB>operator<TAB>param<TAB>shape<TAB>v1<TAB>....\n"
    "npy: --entities-output is a directory (default export) receiving embeddings_TYPE_PART.npy "
    "(float32, shape [count, dim]) and names_TYPE_PART.txt (one name per line, line i = row i); "
    "--relation-types-output (default: the same directory) receives relation_R_SIDE_PARAM.npy and "
    "relation_types.tsv, their index.\n"
    "Entity vectors include their type's global embedding. In names, backslash, tab, newline and carriage "
    "return are written as \\\\ \\t \\n \\r. Floats are printed in the shortest form that reads back exactly. "
    "Existing outputs are refused (before anything is written) unless --force; every file is written "
    "atomically. Formats: docs/formats.md.");
  add_config_args(*cmd, args->config);
  cmd->add_option("--format", args->format, "Output format: tsv or npy")
    ->check(CLI::IsMember({"tsv", "npy"}))
    ->capture_default_str();
  cmd->add_option("--entities-output", args->options.entities_output,
                  "tsv: the entities file (default entities.tsv); npy: the output directory (default export)");
  cmd->add_option("--relation-types-output", args->options.relation_types_output,
                  "tsv: the relation parameters file (default relation_types.tsv); npy: the directory for the "
                  "relation parameter files (default: the entities output directory)");
  auto* version = cmd->add_option("--version", args->version,
                                  "Checkpoint version to export (default: the newest committed one)")
                    ->check(CLI::PositiveNumber);
  cmd->add_flag("--force", args->options.force, "Overwrite existing output files");
  cmd->callback([args, version] { run(*args, version->count() > 0); });
}

} // namespace abg::tools
