#include "actors/node/assembly.h"

#include <fstream>
#include <map>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "abg/storage/files.h"
#include "abg/storage/host_memory.h"
#include "abg/storage/partition_store.h"
#include "abg/version.h"
#include "actors/inspector.h"
#include "actors/role_traffic.h"
#include "actors/spawn.h"
#include "actors/wire_relay.h"

namespace abg::actors {

msg::member describe(const node_context& ctx) {
  msg::member m;
  m.name = ctx.cluster.nodes[ctx.index].name;
  m.dataset = ctx.plan->meta.id.hex();
  m.config_digest = storage::checksum_hex(storage::checksum(ctx.config_toml));
  m.abg_version = std::string(abg_version);
  m.check_only = ctx.check_only ? 1 : 0;
  m.mem_available = storage::available_memory();
  return m;
}

node_roles spawn_roles(caf::actor_system& sys, const node_context& ctx) {
  node_roles out;
  out.member = describe(ctx);
  const auto& spec = ctx.cluster.nodes[ctx.index];
  auto track = [&](auto handle) {
    out.servers.push_back(caf::actor_cast<caf::actor>(handle));
    return handle;
  };
  auto client = [&](auto handle) {
    out.clients.push_back(caf::actor_cast<caf::actor>(handle));
    return handle;
  };
  // Each role actor by its name in the cluster file, for the traffic between roles (actors/role_traffic.h).
  auto named = [](auto handle, std::string_view name) {
    role_traffic::name_actor(handle.id(), std::string(name));
    return handle;
  };
  // Relays are linked to their servers: stopping a relay stops its server.
  auto relayed = [&](auto handle, std::string_view name) {
    return ctx.over_the_wire ? track(named(spawn_wire_relay(sys, handle), name)) : handle;
  };
  if (spec.has(role::lock_server)) {
    auto trainers = static_cast<int32_t>(ctx.cluster.count(role::trainer));
    out.member.lock_server = relayed(
      track(named(spawn_lock_server(sys, ctx.plan->scheduler(ctx.seed, trainers), ctx.limits), to_string(role::lock_server))),
      to_string(role::lock_server));
  }
  if (spec.has(role::partition_server)) {
    table_store store{ctx.plan->cfg->checkpoint_path, ctx.plan->meta.id, ctx.limits, {}};
    // With a partition buffer the partitions not in use live on disk (docs/config.md, buffer_capacity).
    if (ctx.plan->cfg->buffer_capacity > 0) {
      store.disk_path = storage::partition_store_dir(ctx.plan->cfg->checkpoint_path, spec.name);
      out.partitions_on_disk = true;
    }
    out.member.partition_server = relayed(
      track(named(spawn_partition_server(sys, "partition server on node " + spec.name, std::move(store),
                                         shapes_of(*ctx.plan)),
                  to_string(role::partition_server))),
      to_string(role::partition_server));
  }
  if (spec.has(role::parameter_server))
    out.member.parameter_server = relayed(
      track(named(spawn_parameter_server(sys, "parameter server on node " + spec.name), to_string(role::parameter_server))),
      to_string(role::parameter_server));
  if (spec.has(role::trainer)) {
    trainer_hooks hooks;
    if (ctx.callbacks.log)
      hooks.log = [log = ctx.callbacks.log](const std::string& line) { log(line); };
    hooks.bucket_evaluated = ctx.callbacks.bucket_evaluated;
    out.member.trainer = client(named(spawn_trainer(sys, *ctx.plan, std::move(hooks), ctx.limits), to_string(role::trainer)));
  }
  if (spec.has(role::coordinator)) {
    coordinator_setup cs;
    cs.plan = ctx.plan;
    cs.config_toml = ctx.config_toml;
    cs.cluster = ctx.cluster;
    cs.dataset = out.member.dataset;
    cs.config_digest = out.member.config_digest;
    cs.abg_version = out.member.abg_version;
    cs.check_only = ctx.check_only;
    cs.data = track(named(spawn_data_server(sys, *ctx.plan->cfg, {cs.dataset, cs.config_digest, cs.abg_version, {}}),
                          "data_server"));
    cs.seed = ctx.seed;
    cs.held_out_seed = ctx.held_out_seed;
    cs.callbacks.log = ctx.callbacks.log;
    cs.callbacks.iteration_done = ctx.callbacks.iteration_done;
    cs.callbacks.bucket_done = ctx.callbacks.bucket_done;
    cs.limits = ctx.limits;
    out.coordinator = client(named(spawn_coordinator(sys, std::move(cs)), to_string(role::coordinator)));
    out.inspector = client(named(spawn_inspector(sys, out.coordinator, ctx.admin_token, ctx.callbacks.log), "inspector"));
  }
  return out;
}

namespace {

std::string name_of(const caf::actor& a) {
  auto* m = dynamic_cast<caf::monitorable_actor*>(caf::actor_cast<caf::abstract_actor*>(a));
  return fmt::format("{} #{}", m != nullptr ? m->name() : "actor", a.id());
}

} // namespace

void stop_roles(caf::actor_system& sys, const std::vector<node_roles>& nodes,
                const std::function<void(const std::string&)>& log, std::chrono::seconds slow_after) {
  caf::scoped_actor waiter{sys};
  // A console told that the run stops hears it before the node goes (a
  // console that stays attached is not waited for longer than this).
  for (auto& n : nodes)
    if (n.inspector)
      waiter->request(n.inspector, std::chrono::seconds(5), msg::linger_atom::value)
        .receive([](bool) {}, [](caf::error&) {});
  for (auto group : {&node_roles::clients, &node_roles::servers}) {
    std::vector<caf::actor> all;
    for (auto& n : nodes)
      all.insert(all.end(), (n.*group).begin(), (n.*group).end());
    // Waited for through their down messages, so that one that does not
    // stop can be named (a node that hangs on exit says where).
    std::map<caf::actor_addr, std::string> running;
    for (auto& a : all) {
      running.emplace(a.address(), name_of(a));
      waiter->monitor(a);
      caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
    }
    bool named = false;
    while (!running.empty())
      waiter->receive([&](const caf::down_msg& dm) { running.erase(dm.source); },
                      caf::after(slow_after) >> [&] {
                        if (named || !log) return;
                        named = true;
                        std::vector<std::string> names;
                        for (const auto& [addr, name] : running) names.push_back(name);
                        log(fmt::format("{} s after they were told to stop, these roles still run: {}",
                                        slow_after.count(), fmt::join(names, ", ")));
                      });
  }
}

} // namespace abg::actors
