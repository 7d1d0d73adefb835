// One process: every node of PBG's layout in one actor system (messages
// between roles stay in memory, tensors shared, unless over_the_wire puts
// relays in front of the servers). The middleman is loaded only for the
// inspector's port, which a gate guards with a token of this run's own.
#include <filesystem>
#include <optional>

#include <caf/io/all.hpp>
#include <fmt/format.h>
#include <unistd.h>

#include "abg/node/run.h"
#include "actors/node/log_forwarding.h"
#include "actors/node/metrics_endpoint.h"
#include "actors/node/run_common.h"
#include "actors/node/secure_remoting.h"
#include "runtime/train/bucket_step.h"

namespace abg::node {

expected<train_summary> run_simulation(const config& cfg, std::string_view config_toml, const train_options& options,
                                       const train_callbacks& callbacks) {
  if (auto ok = train::check_devices(cfg); !ok)
    return std::unexpected(ok.error());
  auto p = train::make_plan(cfg);
  if (!p)
    return std::unexpected(p.error());
  actors::node_context ctx;
  ctx.plan = &*p;
  ctx.config_toml = std::string(config_toml);
  ctx.cluster = pbg_layout(cfg.num_machines, cfg.num_partition_servers);
  // In one process nothing is lost to a network: no request may time out
  // because a bucket or a big partition took long.
  ctx.limits.request = std::chrono::hours(24);
  ctx.seed = actors::run_seed(options);
  ctx.held_out_seed = options.seed.value_or(0);
  ctx.callbacks = callbacks;
  ctx.over_the_wire = options.over_the_wire;
  ctx.admin_token = options.admin_token;
  if (cfg.num_machines > 1 && callbacks.log)
    callbacks.log(fmt::format("{} machines share their parameters through {} parameter server(s) and their "
                              "partitions through {} partition server(s), simulated in this process",
                              cfg.num_machines, ctx.cluster.count(role::parameter_server),
                              ctx.cluster.count(role::partition_server)));
  actors::secured_system_config sys_cfg;
  actors::configure_system(sys_cfg, nullptr);
  // The inspector's token: written aside first, moved to where `abg console`
  // looks once the port is known, locked while the run lives (so a console
  // tells it from a killed run's) and removed when the run ends.
  const bool inspect = !options.inspect_host.empty();
  std::optional<run_token_file> token_file;
  if (inspect) {
    auto dir = user_runtime_dir();
    if (!dir) return std::unexpected(dir.error());
    auto made = run_token_file::create(*dir / fmt::format("inspector-pid{}.token", ::getpid()));
    if (!made) return std::unexpected(made.error());
    token_file.emplace(std::move(*made));
    sys_cfg.gate = std::make_shared<actors::gate>(
      token_file->token(), actors::gate::limits{},
      [log = callbacks.log](const std::string& line) { if (log) log("inspector: " + line); });
    sys_cfg.load<caf::io::middleman>();
  }
  caf::actor_system sys{sys_cfg};
  std::optional<actors::secure_remoting> remoting;
  if (inspect) remoting.emplace(sys);
  std::vector<actors::node_roles> nodes;
  msg::coordinator_actor coordinator;
  msg::inspector_actor inspector;
  // Each simulated machine's lines go to the run's log under its name.
  std::vector<std::shared_ptr<actors::log_forwarding>> forwarding;
  for (std::size_t i = 0; i < ctx.cluster.nodes.size(); ++i) {
    ctx.index = i;
    forwarding.push_back(actors::log_forwarding::make(ctx.cluster.nodes[i].name, callbacks.log));
    ctx.callbacks = forwarding.back()->wrap(callbacks);
    nodes.push_back(actors::spawn_roles(sys, ctx));
    if (nodes.back().coordinator) {
      coordinator = nodes.back().coordinator;
      inspector = nodes.back().inspector;
    }
  }
  for (auto& f : forwarding) f->connect(coordinator);
  if (inspect) {
    auto port = remoting->publish(inspector, options.inspect_port, options.inspect_host);
    std::optional<error> why;
    if (!port) {
      why = error{fmt::format("the inspector cannot listen on {}:{}: {} (--inspect ADDRESS:PORT, or --inspect "
                              "none)",
                              options.inspect_host, options.inspect_port, sys.render(port.error()))};
    } else if (auto file = inspector_token_file(*port); !file) {
      why = file.error();
    } else if (auto moved = token_file->move_to(*file); !moved) {
      why = moved.error();
    } else {
      remove_stale_inspector_tokens(); // what killed runs left on other ports
      if (callbacks.log)
        callbacks.log(fmt::format("inspector listening on {}:{} (`abg console {}:{}`; token {})", options.inspect_host,
                                  *port, options.inspect_host, *port, file->string()));
    }
    if (why) {
      actors::stop_roles(sys, nodes);
      return std::unexpected(*why);
    }
  }
  std::unique_ptr<actors::metrics_endpoint> metrics;
  if (!options.metrics_host.empty()) {
    auto started = actors::metrics_endpoint::start(sys, coordinator, options.metrics_host, options.metrics_port);
    if (!started) {
      actors::stop_roles(sys, nodes);
      return std::unexpected(started.error());
    }
    metrics = std::move(*started);
    if (callbacks.log)
      callbacks.log(fmt::format("metrics on http://{}:{}/metrics", options.metrics_host, metrics->port()));
  }
  expected<train_summary> result = fail("the run did not start");
  {
    caf::scoped_actor self{sys};
    std::optional<error> refused;
    for (auto& n : nodes)
      self->request(coordinator, caf::infinite, msg::join_atom::value, n.member)
        .receive([](bool) {}, [&](caf::error& e) { refused = error{actors::error_text(sys, e)}; });
    result = refused ? std::unexpected(*refused) : actors::wait_for_run(sys, coordinator, options.stop);
  }
  metrics.reset(); // it asks the coordinator: gone before the roles
  actors::stop_roles(sys, nodes);
  return result;
}

} // namespace abg::node
