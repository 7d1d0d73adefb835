// Each `abg` subcommand lives in its own tools/cmd_*.cpp and registers itself
// on the CLI11 app; main.cpp only wires them together.
#pragma once

#include <CLI/CLI.hpp>

namespace abg::tools {

/// Exit code a subcommand's callback stores for main() to return.
int& exit_code();

void register_config_command(CLI::App& app);       // cmd_config.cpp
void register_import_command(CLI::App& app);       // cmd_import.cpp
void register_info_command(CLI::App& app);         // cmd_info.cpp
void register_export_command(CLI::App& app);       // cmd_export.cpp
void register_average_command(CLI::App& app);      // cmd_average.cpp
void register_neighbors_command(CLI::App& app);    // cmd_neighbors.cpp
void register_debian_graph_command(CLI::App& app); // cmd_debian_graph.cpp
void register_generate_command(CLI::App& app);     // cmd_generate.cpp
void register_learn_commands(CLI::App& app);       // cmd_learn.cpp: train, eval, score, node, simulate (run by abg-learn)
void register_cluster_command(CLI::App& app);      // cmd_cluster.cpp

} // namespace abg::tools
