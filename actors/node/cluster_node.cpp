// One node of a multi-process cluster: its roles in this process's actor
// system, reachable through CAF's middleman on its port; the coordinator's
// node publishes the coordinator there, every other node its node actor,
// and joins through the coordinator's address.
#include <charconv>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <thread>

#include <caf/io/all.hpp>
#include <fmt/format.h>

#include "abg/node/run.h"
#include "abg/storage/files.h"
#include "actors/blocking_peer.h"
#include "actors/role_traffic.h"
#include "actors/node/data_sync.h"
#include "actors/node/log_forwarding.h"
#include "actors/node/metrics_endpoint.h"
#include "actors/node/node_actor.h"
#include "actors/node/run_common.h"
#include "actors/node/secure_remoting.h"
#include "actors/node/shutdown_watch.h"
#include "actors/partition_bulk_server.h"
#include "actors/traffic.h"
#include "runtime/train/bucket_step.h"

namespace abg::node {

namespace {

using clock_type = std::chrono::steady_clock;

node_result failed(std::string why) {
  node_result r;
  r.exit_code = 1;
  r.message = std::move(why);
  return r;
}

// "host:port" written by the coordinator's node (PBG's file:// init method).
std::optional<std::pair<std::string, std::uint16_t>> read_rendezvous(const std::string& file) {
  std::ifstream in(file);
  std::string line;
  if (!std::getline(in, line))
    return std::nullopt;
  auto colon = line.rfind(':');
  if (colon == std::string::npos)
    return std::nullopt;
  std::uint16_t port = 0;
  auto tail = line.substr(colon + 1);
  if (std::from_chars(tail.data(), tail.data() + tail.size(), port).ec != std::errc{} || port == 0)
    return std::nullopt;
  return std::make_pair(line.substr(0, colon), port);
}

// The coordinator's node, which may start after this one: dialled until the
// join deadline (or the stop flag).
struct found_coordinator {
  msg::coordinator_actor handle;
  std::string host;
  std::uint16_t port = 0;
  std::string last_error;
  bool refused = false; // it refused this node's token or TLS: no use trying again
};

found_coordinator find_coordinator(caf::actor_system& sys, actors::secure_remoting& remoting,
                                   const node_options& options, const std::string& name,
                                   clock_type::time_point deadline, const std::function<void(const std::string&)>& say) {
  found_coordinator out{{}, options.coordinator_host, options.coordinator_port, {}};
  bool waiting_said = false;
  while (clock_type::now() < deadline && !(options.train.stop && options.train.stop->load())) {
    if (!options.rendezvous_file.empty()) {
      if (auto addr = read_rendezvous(options.rendezvous_file)) {
        out.host = addr->first;
        out.port = addr->second;
      } else {
        out.host.clear();
      }
    }
    if (!out.host.empty()) {
      auto c = remoting.remote_actor<msg::coordinator_actor>(out.host, out.port);
      if (c) {
        out.handle = *c;
        return out;
      }
      out.last_error = actors::error_text(sys, c.error());
      if (c.error() == actors::handshake_refused) {
        out.refused = true;
        return out;
      }
    }
    if (!waiting_said) {
      say(fmt::format("node {}: waiting for the coordinator at {}", name,
                      out.host.empty() ? "the address in " + options.rendezvous_file
                                       : fmt::format("{}:{}", out.host, out.port)));
      waiting_said = true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
  return out;
}

} // namespace

node_result run_node(const config& cfg, std::string_view config_toml, const node_options& options,
                     const train_callbacks& callbacks) {
  if (auto ok = train::check_devices(cfg); !ok)
    return failed(ok.error().message);
  const auto& spec = options.cluster.nodes.at(options.index);
  // Every line is printed here and goes to the run's log at the coordinator as well.
  auto forwarding = actors::log_forwarding::make(spec.name, callbacks.log);
  const auto logged = forwarding->wrap(callbacks);
  auto say = [&](const std::string& line) { logged.log(line); };
  actors::node_context ctx;
  ctx.config_toml = std::string(config_toml);
  ctx.cluster = options.cluster;
  ctx.index = options.index;
  ctx.seed = actors::run_seed(options.train);
  ctx.held_out_seed = options.train.seed.value_or(0);
  ctx.callbacks = logged;
  ctx.limits = actors::deadlines_of(options.cluster);
  ctx.check_only = options.check_only;
  ctx.admin_token = options.train.admin_token;
  if (options.token.key.empty())
    return failed(fmt::format("node {}: no cluster token (docs/security.md)", spec.name));
  std::shared_ptr<msg::tls::context> tls;
  if (options.cluster.tls.enabled()) {
    auto files = options.cluster.tls.of_node(spec.name);
    auto loaded = msg::tls::context::load({files.certificate, files.key, files.ca});
    if (!loaded) return failed(fmt::format("node {}: {}", spec.name, loaded.error().message));
    tls = std::move(*loaded);
  }
  actors::secured_system_config sys_cfg;
  sys_cfg.gate = std::make_shared<actors::gate>(
    options.token, actors::gate::limits{options.cluster.handshake_timeout, options.cluster.max_pending_connections},
    [&](const std::string& line) { say(fmt::format("node {}: {}", spec.name, line)); }, std::move(tls));
  actors::configure_system(sys_cfg, &options.cluster);
  // A node whose exit hangs says where (printed here only: the coordinator may be gone).
  actors::shutdown_watch exit_watch(
    [&](const std::string& line) {
      if (callbacks.log) callbacks.log(fmt::format("node {}: {}", spec.name, line));
    },
    std::chrono::seconds(10));
  caf::actor_system sys{sys_cfg};
  const actors::shutdown_watch::marker system_end(exit_watch, "the actor system's end (actors still running)");
  // Every port and connection of this node: behind the cluster token.
  actors::secure_remoting remoting{sys};
  const actors::shutdown_watch::marker remoting_end(exit_watch, "closing CAF's connections (secure_remoting)");
  // This thread joins and fetches data for the node: its helpers' messages are the node's.
  actors::role_traffic::set_thread_role(std::string(actors::role_traffic::node_role));
  // CAF's connections are sampled every so often, so that one closed before
  // the end still counts in the node's traffic.
  std::jthread sampler([](std::stop_token stop) {
    for (int tick = 0; !stop.stop_requested(); ++tick) {
      if (tick % 10 == 0) actors::traffic::sample();
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  });
  const auto deadline = clock_type::now() + ctx.limits.join;
  // A node without the coordinator finds it first: its data may have to come from there.
  found_coordinator coordinator;
  if (!spec.has(role::coordinator)) {
    coordinator = find_coordinator(sys, remoting, options, spec.name, deadline, say);
    if (coordinator.refused)
      return failed(fmt::format("node {}: {}; every node of a cluster needs the same token file (--token-file, "
                                "ABG_TOKEN_FILE or the cluster file's token_file) and the same [tls] section",
                                spec.name, coordinator.last_error));
    if (coordinator.handle) forwarding->connect(coordinator.handle);
    if (!coordinator.handle) {
      if (options.train.stop && options.train.stop->load()) {
        node_result r;
        r.stopped = true;
        return r;
      }
      return failed(fmt::format("node {}: the coordinator at {} did not answer within {} s{}", spec.name,
                                coordinator.host.empty() ? options.rendezvous_file
                                                         : fmt::format("{}:{}", coordinator.host, coordinator.port),
                                std::chrono::duration_cast<std::chrono::seconds>(ctx.limits.join).count(),
                                coordinator.last_error.empty() ? "" : " (" + coordinator.last_error + ")"));
    }
    auto data = actors::blocking_peer(sys, coordinator.handle, ctx.limits.request, options.train.stop)
                  .ask<msg::data_server_actor>("asking the coordinator where its data is", msg::data_atom::value);
    if (!data)
      return failed(fmt::format("node {}: {}", spec.name, data.error().message));
    auto synced = actors::sync_data(sys, *data, cfg, config_toml, options.fetch_data && !options.check_only,
                                    ctx.limits, options.train.stop,
                                    [&](const std::string& line) { say("node " + spec.name + ": " + line); });
    if (!synced) {
      auto why = fmt::format("node {}: {}", spec.name, synced.error().message);
      // A check ends at the first failure: the coordinator need not wait for this node.
      if (options.check_only) {
        caf::anon_send(coordinator.handle, msg::failed_atom::value, why);
        // Sent asynchronously: give the middleman a moment to write it before the system goes down.
        std::this_thread::sleep_for(std::chrono::milliseconds(500));
      }
      return failed(why);
    }
  }
  auto p = train::make_plan(cfg);
  if (!p)
    return failed(p.error().message);
  ctx.plan = &*p;
  std::vector<actors::node_roles> nodes{actors::spawn_roles(sys, ctx)};
  auto& roles = nodes.front();
  if (roles.coordinator) forwarding->connect(roles.coordinator);
  node_result out;
  std::unique_ptr<actors::metrics_endpoint> metrics;
  // A partition server's rows travel over its bulk channel, beside CAF.
  std::unique_ptr<actors::partition_bulk_server> bulk;
  if (roles.member.partition_server) {
    auto started = actors::partition_bulk_server::start(sys, roles.member.partition_server, options.host, ctx.limits,
                                                        actors::shapes_of(*ctx.plan), roles.partitions_on_disk);
    if (!started) {
      actors::stop_roles(sys, nodes);
      return failed(fmt::format("node {}: {}", spec.name, started.error().message));
    }
    bulk = std::move(*started);
    roles.member.partition_bulk = fmt::format("{}:{}", options.host.empty() ? "127.0.0.1" : options.host, bulk->port());
  }
  {
    caf::scoped_actor self{sys};
    actors::role_traffic::helper_name named{self->id()};
    auto node = actors::spawn_node_actor(sys, caf::actor_cast<caf::actor>(self), ctx.limits.request, remoting.actor());
    roles.servers.push_back(caf::actor_cast<caf::actor>(node));
    auto member = roles.member;
    member.node = node;
    member.host = options.host;
    if (roles.coordinator) {
      auto port = remoting.publish(roles.coordinator, options.port, options.host);
      if (!port) {
        out = failed(fmt::format("node {} cannot listen on {}:{}: {}", spec.name, options.host, options.port,
                                 sys.render(port.error())));
      } else {
        member.port = *port;
        say(fmt::format("node {}: coordinator listening on {}:{}", spec.name, options.host, *port));
        // The inspector, behind the same gate: `abg console` with the cluster's token.
        if (!options.train.inspect_host.empty()) {
          auto at = remoting.publish(roles.inspector, options.train.inspect_port, options.train.inspect_host);
          if (!at)
            out = failed(fmt::format("node {}: the inspector cannot listen on {}:{}: {} (--inspect ADDRESS:PORT, "
                                     "or --inspect none)",
                                     spec.name, options.train.inspect_host, options.train.inspect_port,
                                     sys.render(at.error())));
          else
            say(fmt::format("node {}: inspector listening on {}:{} (`abg console {}:{}`)", spec.name,
                            options.train.inspect_host, *at, options.train.inspect_host, *at));
        }
        if (out.exit_code == 0 && !options.train.metrics_host.empty()) {
          auto started = actors::metrics_endpoint::start(sys, roles.coordinator, options.train.metrics_host,
                                                         options.train.metrics_port);
          if (!started) {
            out = failed(fmt::format("node {}: {}", spec.name, started.error().message));
          } else {
            metrics = std::move(*started);
            say(fmt::format("node {}: metrics on http://{}:{}/metrics", spec.name, options.train.metrics_host,
                            metrics->port()));
          }
        }
        if (!options.rendezvous_file.empty())
          if (auto ok = storage::write_file_atomic(options.rendezvous_file, fmt::format("{}:{}\n", options.host, *port));
              !ok)
            out = failed(ok.error().message);
      }
      if (out.exit_code == 0) {
        std::optional<error> refused;
        self->request(roles.coordinator, caf::infinite, msg::join_atom::value, member)
          .receive([](bool) {}, [&](caf::error& e) { refused = error{actors::error_text(sys, e)}; });
        auto summary = refused ? std::unexpected(*refused)
                               : actors::wait_for_run(sys, roles.coordinator, options.train.stop);
        if (!summary) {
          out = failed(summary.error().message);
        } else {
          out.summary = *summary;
          out.stopped = summary->stopped;
        }
      }
    } else {
      auto port = remoting.publish(node, options.port, options.host);
      if (!port) {
        out = failed(fmt::format("node {} cannot listen on {}:{}: {}", spec.name, options.host, options.port,
                                 sys.render(port.error())));
      } else {
        member.port = *port;
        const auto& host = coordinator.host;
        const auto cport = coordinator.port;
        std::optional<error> refused;
        self->request(coordinator.handle, ctx.limits.request, msg::join_atom::value, member)
          .receive([](bool) {}, [&](caf::error& e) { refused = error{actors::error_text(sys, e)}; });
        if (refused) {
          out = failed(fmt::format("node {}: the coordinator refused it: {}", spec.name, refused->message));
        } else {
          say(fmt::format("node {}: joined the cluster (coordinator at {}:{})", spec.name, host, cport));
          self->monitor(coordinator.handle);
          bool done = false;
          while (!done) {
            self->receive(
              [&](msg::finish_atom, int32_t code, std::string& why) {
                out.exit_code = code;
                out.message = std::move(why);
                done = true;
              },
              [&](caf::down_msg& dm) {
                out = failed(fmt::format("node {}: lost the coordinator at {}:{} ({}); if this node was frozen or "
                                         "cut off, the cluster has declared it lost. Relaunch it to join again, or "
                                         "every node to resume from the last committed checkpoint",
                                         spec.name, host, cport, sys.render(dm.reason)));
                done = true;
              },
              caf::after(std::chrono::milliseconds(50)) >> [&] {
                if (options.train.stop && options.train.stop->load()) {
                  out.stopped = true;
                  done = true;
                }
              });
          }
        }
      }
    }
  }
  metrics.reset(); // it asks the coordinator: gone before the roles
  say(fmt::format("node {}: traffic with the other nodes: {}", spec.name,
                  actors::traffic::describe(actors::traffic::measure())));
  exit_watch.stage("stopping the roles");
  actors::stop_roles(sys, nodes, [&](const std::string& line) { say(fmt::format("node {}: {}", spec.name, line)); });
  exit_watch.stage("closing the partition bulk channel");
  bulk.reset();
  return out;
}

} // namespace abg::node
