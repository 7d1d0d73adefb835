// abg-console: `abg console`, without LibTorch. A console attaches to a run
// while it trains; loading LibTorch's libraries would cost that run about a
// second of CPU (bench/console_overhead.sh), and the console needs none of it.
#include <CLI/CLI.hpp>

#include "tools/console/commands.h"

int main(int argc, char** argv) {
  CLI::App app{"abg console: attaches to a running run; run it as `abg console`."};
  app.name("abg");
  app.require_subcommand(1);
  int code = 0;
  abg::tools::register_console_command(app, code);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  return code;
}
