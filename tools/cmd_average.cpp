// `abg average CONFIG --last K`: the mean of the last K end-of-epoch checkpoint versions as a new version.
#include <fmt/core.h>
#include <fmt/ranges.h>

#include "abg/storage/average.h"
#include "tools/commands.h"
#include "tools/config_options.h"

namespace abg::tools {

void register_average_command(CLI::App& app) {
  struct average_args {
    config_args config;
    std::int64_t last = 0;
  };
  auto args = std::make_shared<average_args>();
  auto* cmd = app.add_subcommand(
    "average", "Average the parameters of the last K end-of-epoch versions of the config's checkpoint_path "
               "(entity embeddings, relation operators, global embeddings) and commit the mean as a new version, "
               "which abg eval, export, neighbors and score then read (checkpoint averaging, as stochastic weight "
               "averaging does it).");
  cmd->footer(
    "Train with checkpoint_keep_versions >= K so that the versions are there. The new version keeps the newest "
    "averaged version's optimizer state and position: abg train with more epochs goes on from the mean. The "
    "averaged versions stay on disk, so another K can be tried; averaging an average is refused. docs/model.md "
    "says when it helps.");
  add_config_args(*cmd, args->config);
  cmd->add_option("--last", args->last, "How many of the newest end-of-epoch versions to average (at least 2)")
    ->required()
    ->check(CLI::Range(std::int64_t{2}, std::int64_t{1} << 20));
  cmd->callback([args] {
    auto cfg = load_config_or_report(args->config);
    if (!cfg) {
      exit_code() = 1;
      return;
    }
    auto summary = storage::average_checkpoints(*cfg, args->last);
    if (!summary) {
      fmt::print(stderr, "error: {}\n", summary.error().message);
      exit_code() = 1;
      return;
    }
    fmt::print(stderr, "committed version {} in {}: the mean of versions {} ({} table(s), {} shared parameter(s))\n",
               summary->version, cfg->checkpoint_path, fmt::join(summary->averaged, ", "), summary->tables,
               summary->shared);
  });
}

} // namespace abg::tools
