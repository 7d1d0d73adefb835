// One process: every node of PBG's layout in one actor system (no middleman:
// messages between roles stay in memory, tensors shared, unless
// over_the_wire puts relays in front of the servers).
#include <fmt/format.h>

#include "abg/node/run.h"
#include "actors/node/run_common.h"
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
  if (cfg.num_machines > 1 && callbacks.log)
    callbacks.log(fmt::format("{} machines share their parameters through {} parameter server(s) and their "
                              "partitions through {} partition server(s), simulated in this process",
                              cfg.num_machines, ctx.cluster.count(role::parameter_server),
                              ctx.cluster.count(role::partition_server)));
  caf::actor_system_config sys_cfg;
  actors::configure_system(sys_cfg, nullptr);
  caf::actor_system sys{sys_cfg};
  std::vector<actors::node_roles> nodes;
  msg::coordinator_actor coordinator;
  for (std::size_t i = 0; i < ctx.cluster.nodes.size(); ++i) {
    ctx.index = i;
    nodes.push_back(actors::spawn_roles(sys, ctx));
    if (nodes.back().coordinator)
      coordinator = nodes.back().coordinator;
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
  actors::stop_roles(sys, nodes);
  return result;
}

} // namespace abg::node
