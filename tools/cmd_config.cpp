// `abg config CONFIG [-p KEY=VALUE]...`: validate a config and print it in full.
#include <fmt/core.h>

#include "tools/commands.h"
#include "tools/config_options.h"

namespace abg::tools {

void register_config_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
    "config", "Validate a training config and print the effective config: every key with its "
              "value after -p overrides, defaults filled in, none-defaults left out. The output "
              "is TOML that loads back to the same config. Exits 1 and lists every problem "
              "(file:line:column, key, given, expected) if the config is invalid.");
  auto args = std::make_shared<config_args>();
  add_config_args(*cmd, *args);
  cmd->footer(describe_config_keys());
  cmd->callback([args] {
    auto c = load_config_or_report(*args);
    if (!c) {
      exit_code() = 1;
      return;
    }
    fmt::print("{}", to_toml(*c));
  });
}

} // namespace abg::tools
