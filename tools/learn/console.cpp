// `abg console HOST:PORT --exec VIEW [--json]`: attaches to a running run's
// inspector (docs/console.md) through the same gate as a node, asks for one
// view and prints it: as the inspector's JSON document, or drawn as text.
#include <cstdlib>
#include <filesystem>
#include <memory>

#include <CLI/CLI.hpp>
#include <caf/io/all.hpp>
#include <fmt/format.h>

#include "abg/token.h"
#include "actors/node/run_common.h"
#include "actors/node/secure_remoting.h"
#include "tools/learn/commands.h"
#include "tools/learn/console_render.h"
#include "tools/learn/node_launch.h"

namespace abg::tools {

namespace {

struct console_args {
  std::string endpoint;
  std::string view;
  bool json = false;
  std::string token_file;
};

// --token-file, ABG_TOKEN_FILE, then on loopback the token of this user's
// single-process run on that port, else this user's loopback cluster token.
expected<cluster_token> console_token(const console_args& a, const std::string& host, std::uint16_t port) {
  if (!a.token_file.empty()) return read_token_file(a.token_file);
  if (const char* env = std::getenv("ABG_TOKEN_FILE"); env && *env) return read_token_file(env);
  if (!is_loopback_host(host))
    return fail("{} is beyond loopback: give the cluster's token file with --token-file FILE or ABG_TOKEN_FILE "
                "(docs/console.md)",
                a.endpoint);
  auto run_file = inspector_token_file(port);
  if (!run_file) return std::unexpected(run_file.error());
  std::error_code ec;
  if (std::filesystem::exists(*run_file, ec)) return read_token_file(*run_file);
  return loopback_token();
}

int run_console(const console_args& a) {
  auto at = parse_host_port(a.endpoint);
  if (!at || at->second == 0) {
    fmt::print(stderr, "error: {}: give the inspector's HOST:PORT (the run prints it: \"inspector listening on "
                       "HOST:PORT\")\n",
               a.endpoint);
    return 1;
  }
  const auto& [host, port] = *at;
  auto token = console_token(a, host, port);
  if (!token) {
    fmt::print(stderr, "error: {}\n", token.error().message);
    return 1;
  }
  actors::secured_system_config cfg;
  cfg.gate = std::make_shared<actors::gate>(std::move(*token), actors::gate::limits{},
                                            [](const std::string& line) { fmt::print(stderr, "{}\n", line); });
  actors::configure_system(cfg, nullptr);
  cfg.load<caf::io::middleman>();
  caf::actor_system sys{cfg};
  int code = 0;
  {
    actors::secure_remoting remoting{sys};
    auto inspector = remoting.remote_actor<msg::inspector_actor>(host, port);
    if (!inspector) {
      fmt::print(stderr, "error: cannot attach to the run at {}: {}\n", a.endpoint,
                 actors::error_text(sys, inspector.error()));
      return 1;
    }
    caf::scoped_actor self{sys};
    self->request(*inspector, std::chrono::seconds(10), msg::inspect_atom::value, a.view)
      .receive(
        [&](const std::string& doc) {
          if (a.json) {
            fmt::print("{}\n", doc);
            return;
          }
          auto parsed = nlohmann::json::parse(doc, nullptr, false);
          fmt::print("{}", parsed.is_discarded() ? doc + "\n" : render_view(parsed));
        },
        [&](const caf::error& e) {
          fmt::print(stderr, "error: {}: {}\n", a.endpoint, actors::error_text(sys, e));
          code = 1;
        });
  }
  return code;
}

} // namespace

void register_console_command(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<console_args>();
  auto* cmd = app.add_subcommand(
    "console", "Attach to a running run's inspector (the address `abg train` or the coordinator's `abg node` "
               "prints: \"inspector listening on HOST:PORT\") and print a view of it: nodes, buckets, trainers or "
               "events. Read-only: it never changes the run. docs/console.md");
  cmd->add_option("HOST:PORT", args->endpoint, "The inspector's address")->required();
  cmd->add_option("--exec", args->view, "The view to print: nodes, buckets, trainers or events")->required();
  cmd->add_flag("--json", args->json, "Print the view as one JSON document (docs/console.md) instead of text");
  cmd->add_option("--token-file", args->token_file,
                  "The run's token: a cluster's token file. Default: $ABG_TOKEN_FILE, else on loopback the token "
                  "this user's single-process run on that port wrote to the runtime folder, else this user's "
                  "loopback cluster token");
  cmd->callback([args, &exit_code] { exit_code = run_console(*args); });
}

} // namespace abg::tools
