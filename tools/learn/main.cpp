// abg-learn: the subcommands that need LibTorch. Users run them as `abg train`,
// `abg eval`, `abg score`, `abg node` and `abg simulate` (tools/cmd_learn.cpp forwards here).
#include <CLI/CLI.hpp>
#include <fmt/core.h>

#include "tools/learn/commands.h"

int main(int argc, char** argv) {
  CLI::App app{"abg: the LibTorch subcommands (train, eval, score, node, simulate); run them as `abg train`, "
               "`abg eval`, `abg score`, `abg node`, `abg simulate`."};
  app.name("abg");
  app.require_subcommand(1);
  int code = 0;
  abg::tools::register_train_command(app, code);
  abg::tools::register_eval_command(app, code);
  abg::tools::register_score_command(app, code);
  abg::tools::register_node_command(app, code);
  abg::tools::register_simulate_command(app, code);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  return code;
}
