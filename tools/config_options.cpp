#include "tools/config_options.h"

#include <fmt/core.h>

namespace abg::tools {

void add_config_args(CLI::App& cmd, config_args& args) {
  cmd.add_option("CONFIG", args.path, "Training config (TOML, PyTorch-BigGraph's keys; "
                                      "`abg config --help` lists them)")
    ->required()
    ->check(CLI::ExistingFile);
  // One value per -p, so `-p k=v CONFIG` never swallows CONFIG.
  cmd.add_option("-p,--param", args.overrides,
                 "Override a config key, applied in order before validation: dotted paths "
                 "(dimension=200, entities.NAME.num_partitions=4, relations.0.operator=translation), "
                 "lists comma-separated (edge_paths=a,b,c); repeat -p for each key")
    ->allow_extra_args(false)
    ->type_name("KEY=VALUE");
}

std::optional<abg::config> load_config_or_report(const config_args& args) {
  auto loaded = abg::load_config(args.path, args.overrides);
  if (!loaded) {
    fmt::print(stderr, "{}\n", loaded.error().message);
    return std::nullopt;
  }
  for (const auto& w : loaded->warnings)
    fmt::print(stderr, "warning: {}\n", w);
  return std::move(loaded->value);
}

} // namespace abg::tools
