// abg-learn's subcommands, one file each.
#pragma once

#include <CLI/CLI.hpp>

namespace abg::tools {

void register_train_command(CLI::App& app, int& exit_code); // train.cpp
void register_eval_command(CLI::App& app, int& exit_code);  // eval.cpp
void register_score_command(CLI::App& app, int& exit_code); // score.cpp
void register_node_command(CLI::App& app, int& exit_code);  // node.cpp
void register_simulate_command(CLI::App& app, int& exit_code); // simulate.cpp

} // namespace abg::tools
