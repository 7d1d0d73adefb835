// abg-console's one subcommand (tools/cmd_learn.cpp forwards `abg console` here).
#pragma once

#include <CLI/CLI.hpp>

namespace abg::tools {

void register_console_command(CLI::App& app, int& exit_code); // console.cpp

} // namespace abg::tools
