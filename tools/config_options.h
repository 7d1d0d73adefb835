// The CONFIG argument and -p overrides every config-taking subcommand shares.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "abg/config.h"

namespace abg::tools {

struct config_args {
  std::string path;
  std::vector<std::string> overrides; // KEY=VALUE, in command-line order
};

/// Adds the positional CONFIG (required, must exist) and a repeatable
/// -p,--param KEY=VALUE to `cmd`.
void add_config_args(CLI::App& cmd, config_args& args);

/// Loads and validates the config. Prints every error to stderr and returns
/// nullopt on failure; prints warnings as "warning: ..." and goes on.
std::optional<abg::config> load_config_or_report(const config_args& args);

} // namespace abg::tools
