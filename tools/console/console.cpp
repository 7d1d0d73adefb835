// `abg console [HOST:PORT] [--cluster CLUSTER] [--exec VIEW|COMMAND] [--json]
// [--admin]`: attaches to a running run's inspector (docs/console.md)
// through the same gate as a node (and TLS with a cluster's [tls]). With
// --exec it asks for one view and prints it, as the inspector's JSON
// document or drawn as text, or with --admin and the run's admin token
// sends one command (pause, resume, checkpoint, stop), proven by an HMAC
// over the inspector's nonce; without, an interactive session
// (console_session.h) does the same command by command.
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>

#include <CLI/CLI.hpp>
#include <caf/io/all.hpp>
#include <fmt/format.h>

#include "abg/cluster.h"
#include "abg/token.h"
#include "actors/node/error_text.h"
#include "actors/node/system_config.h"
#include "actors/node/secure_remoting.h"
#include "messages/admin_proof.h"
#include "messages/interfaces.h"
#include "messages/tls.h"
#include "tools/console/commands.h"
#include "tools/console/console_render.h"
#include "tools/console/console_session.h"

namespace abg::tools {

namespace {

struct console_args {
  std::string endpoint;
  std::string cluster;
  std::string view;
  bool json = false;
  std::string token_file;
  bool admin = false;
  std::string admin_token_file;
};

// --token-file, ABG_TOKEN_FILE, the cluster file's token_file, then on
// loopback the token of this user's live single-process run on that port, else
// this user's loopback cluster token.
expected<cluster_token> console_token(const console_args& a, const cluster_spec* spec, const std::string& host,
                                      std::uint16_t port) {
  if (auto named = named_token(a.token_file, "ABG_TOKEN_FILE", spec ? spec->token_file : "")) return std::move(*named);
  if (!is_loopback_host(host))
    return fail("{}:{} is beyond loopback: give the cluster's token file with --token-file FILE, ABG_TOKEN_FILE or "
                "--cluster CLUSTER.toml (docs/console.md)",
                host, port);
  if (!spec) {
    auto run = running_inspector_token(port);
    if (!run) return std::unexpected(run.error());
    if (*run) return std::move(**run);
  }
  return loopback_token();
}

int say_error(const std::string& text) {
  fmt::print(stderr, "error: {}\n", text);
  return 1;
}

int run_console(const console_args& a) {
  std::optional<cluster_spec> spec;
  if (!a.cluster.empty()) {
    auto read = read_cluster_file(a.cluster);
    if (!read) return say_error(read.error().message);
    spec = std::move(*read);
  }
  std::string endpoint = a.endpoint;
  if (endpoint.empty() && spec) endpoint = spec->inspect;
  if (endpoint.empty())
    return say_error(spec ? fmt::format("{} does not say where the inspector listens (cluster.inspect): give "
                                        "HOST:PORT, as the coordinator's node printed it",
                                        a.cluster)
                          : "give the inspector's HOST:PORT (the run prints it: \"inspector listening on "
                            "HOST:PORT\"), or --cluster CLUSTER.toml");
  auto at = parse_host_port(endpoint);
  if (!at || at->second == 0)
    return say_error(fmt::format("{}: give the inspector's HOST:PORT (the run prints it: \"inspector listening on "
                                 "HOST:PORT\")",
                                 endpoint));
  const auto& [host, port] = *at;
  const bool command = is_console_command(a.view);
  if (command && !a.admin)
    return say_error(fmt::format("'{}' steers the run: attach with --admin and the run's admin token file "
                                 "(--admin-token-file, ABG_ADMIN_TOKEN_FILE or the cluster file's "
                                 "admin_token_file); without it a console only reads",
                                 a.view));
  std::optional<cluster_token> admin;
  if (a.admin) {
    auto named = named_token(a.admin_token_file, "ABG_ADMIN_TOKEN_FILE", spec ? spec->admin_token_file : "");
    if (!named)
      return say_error("--admin needs the run's admin token file: --admin-token-file FILE, ABG_ADMIN_TOKEN_FILE, "
                       "or --cluster CLUSTER.toml naming cluster.admin_token_file (docs/console.md)");
    if (!*named) return say_error("the admin token: " + named->error().message);
    admin = std::move(**named);
  }
  auto token = console_token(a, spec ? &*spec : nullptr, host, port);
  if (!token) return say_error(token.error().message);
  // A cluster's [tls]: the console's own certificate ({name} = "console",
  // as `abg cluster certs` writes it), verified against the cluster's CA.
  std::shared_ptr<msg::tls::context> tls;
  if (spec && spec->tls.enabled()) {
    auto files = spec->tls.of_node("console");
    auto loaded = msg::tls::context::load({files.certificate, files.key, files.ca});
    if (!loaded) return say_error(fmt::format("the console's TLS files ({{name}} = console): {}", loaded.error().message));
    tls = std::move(*loaded);
  }
  actors::secured_system_config cfg;
  cfg.gate = std::make_shared<actors::gate>(std::move(*token), actors::gate::limits{},
                                            [](const std::string& line) { fmt::print(stderr, "{}\n", line); },
                                            std::move(tls));
  actors::configure_system(cfg, nullptr);
  cfg.load<caf::io::middleman>();
  caf::actor_system sys{cfg};
  actors::secure_remoting remoting{sys};
  auto inspector = remoting.remote_actor<msg::inspector_actor>(host, port);
  if (!inspector)
    return say_error(fmt::format("cannot attach to the run at {}: {}", endpoint, actors::error_text(sys, inspector.error())));
  caf::scoped_actor self{sys};
  auto failed = [&](const caf::error& e) {
    return std::unexpected(error{fmt::format("{}: {}", endpoint, actors::error_text(sys, e))});
  };
  console_session session;
  session.json = a.json;
  session.prompt = fmt::format("abg {}> ", endpoint);
  session.view = [&](const std::string& view) -> expected<std::string> {
    expected<std::string> out = fail("no answer");
    self->request(*inspector, std::chrono::seconds(10), msg::inspect_atom::value, view)
      .receive([&](std::string& doc) { out = std::move(doc); }, [&](caf::error& e) { out = failed(e); });
    return out;
  };
  if (admin)
    session.command = [&](const std::string& what) -> expected<std::string> {
      expected<std::string> out = fail("no answer");
      std::string nonce;
      self->request(*inspector, std::chrono::seconds(10), msg::challenge_atom::value)
        .receive([&](std::string& n) { nonce = std::move(n); }, [&](caf::error& e) { out = failed(e); });
      if (nonce.empty()) return out;
      // A checkpoint waits for the buckets being trained, however long they take.
      const auto wait = what == "checkpoint" ? caf::timespan{std::chrono::hours(24)}
                                                : caf::timespan{std::chrono::seconds(30)};
      self->request(*inspector, wait, msg::admin_atom::value, what, nonce,
                    msg::admin::proof_hex(admin->key, nonce, what))
        .receive([&](std::string& done) { out = std::move(done); }, [&](caf::error& e) { out = failed(e); });
      return out;
    };
  if (a.view.empty()) {
    if (const char* home = std::getenv("HOME")) session.history_file = fmt::format("{}/.abg_console_history", home);
    return run_console_session(session);
  }
  return run_console_line(session, a.view, false);
}

} // namespace

void register_console_command(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<console_args>();
  auto* cmd = app.add_subcommand(
    "console", "Attach to a running run's inspector (the address `abg train` or the coordinator's `abg node` "
               "prints: \"inspector listening on HOST:PORT\"). Without --exec, an interactive session: the views "
               "nodes, buckets, partitions, params, trainers, traffic, events and log, `watch VIEW`, `help`, with readline's history "
               "(~/.abg_console_history) and tab completion; from a pipe, one command per line. Read-only, unless "
               "attached with --admin and the run's admin token: then pause, resume, checkpoint (commit now) and "
               "stop (commit, then end the run) steer it. docs/console.md");
  cmd->add_option("HOST:PORT", args->endpoint, "The inspector's address (default with --cluster: its cluster.inspect)");
  cmd->add_option("--cluster", args->cluster,
                  "The cluster file: its token_file, admin_token_file, inspect and [tls] (the console's certificate "
                  "is {name} = console; `abg cluster certs` writes one)")
    ->check(CLI::ExistingFile);
  cmd->add_option("--exec", args->view,
                  "Print one view (nodes, buckets, partitions, params, trainers, traffic, events, log) or, with --admin, send one command (pause, "
                  "resume, checkpoint, stop), then exit");
  cmd->add_flag("--json", args->json, "Print the view (or the command's result) as one JSON document (docs/console.md)");
  cmd->add_option("--token-file", args->token_file,
                  "The run's token: a cluster's token file. Default: $ABG_TOKEN_FILE, else the --cluster file's "
                  "token_file, else on loopback the token this user's single-process run on that port wrote to the "
                  "runtime folder, else this user's loopback cluster token");
  cmd->add_flag("--admin", args->admin,
                "Steer the run (pause, resume, checkpoint, stop), proving the run's admin token; refused by a run "
                "without one");
  cmd->add_option("--admin-token-file", args->admin_token_file,
                  "With --admin: the run's admin token file. Default: $ABG_ADMIN_TOKEN_FILE, else the --cluster "
                  "file's admin_token_file");
  cmd->callback([args, &exit_code] { exit_code = run_console(*args); });
}

} // namespace abg::tools
