#include "tools/commands.h"

#include <fmt/core.h>

#include "abg/version.h"

int& abg::tools::exit_code() {
  static int code = 0;
  return code;
}

int main(int argc, char** argv) {
  CLI::App app{"abg (Actor BigGraph): trains embeddings of large multi-relation graphs, "
               "PyTorch-BigGraph's algorithm as a native actor runtime."};
  app.require_subcommand(1);
  app.set_version_flag("--version", "abg " + std::string(abg::abg_version));
  abg::tools::register_config_command(app);
  abg::tools::register_import_command(app);
  abg::tools::register_learn_commands(app);
  abg::tools::register_cluster_command(app);
  abg::tools::register_neighbors_command(app);
  abg::tools::register_info_command(app);
  abg::tools::register_export_command(app);
  abg::tools::register_average_command(app);
  abg::tools::register_debian_graph_command(app);
  abg::tools::register_generate_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  return abg::tools::exit_code();
}
