// One node of a multi-process cluster: its roles in this process's actor
// system, reachable through CAF's middleman on its port; the coordinator's
// node publishes the coordinator there, every other node its node actor,
// and joins through the coordinator's address.
#include <charconv>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include <caf/io/all.hpp>
#include <fmt/format.h>

#include "abg/node/run.h"
#include "abg/storage/files.h"
#include "actors/node/node_actor.h"
#include "actors/node/run_common.h"
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

} // namespace

node_result run_node(const config& cfg, std::string_view config_toml, const node_options& options,
                     const train_callbacks& callbacks) {
  if (auto ok = train::check_devices(cfg); !ok)
    return failed(ok.error().message);
  auto p = train::make_plan(cfg);
  if (!p)
    return failed(p.error().message);
  const auto& spec = options.cluster.nodes.at(options.index);
  auto say = [&](const std::string& line) {
    if (callbacks.log)
      callbacks.log(line);
  };
  actors::node_context ctx;
  ctx.plan = &*p;
  ctx.config_toml = std::string(config_toml);
  ctx.cluster = options.cluster;
  ctx.index = options.index;
  ctx.seed = actors::run_seed(options.train);
  ctx.held_out_seed = options.train.seed.value_or(0);
  ctx.callbacks = callbacks;
  ctx.limits = actors::deadlines_of(options.cluster);
  caf::actor_system_config sys_cfg;
  actors::configure_system(sys_cfg, &options.cluster);
  caf::actor_system sys{sys_cfg};
  std::vector<actors::node_roles> nodes{actors::spawn_roles(sys, ctx)};
  auto& roles = nodes.front();
  node_result out;
  {
    caf::scoped_actor self{sys};
    auto node = actors::spawn_node_actor(sys, caf::actor_cast<caf::actor>(self), ctx.limits.request);
    roles.servers.push_back(caf::actor_cast<caf::actor>(node));
    auto member = roles.member;
    member.node = node;
    member.host = options.host;
    const char* bind = options.host.empty() ? nullptr : options.host.c_str();
    auto deadline = clock_type::now() + ctx.limits.join;
    if (roles.coordinator) {
      auto port = sys.middleman().publish(roles.coordinator, options.port, bind, true);
      if (!port) {
        out = failed(fmt::format("node {} cannot listen on {}:{}: {}", spec.name, options.host, options.port,
                                 sys.render(port.error())));
      } else {
        member.port = *port;
        say(fmt::format("node {}: coordinator listening on {}:{}", spec.name, options.host, *port));
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
      auto port = sys.middleman().publish(node, options.port, bind, true);
      if (!port) {
        out = failed(fmt::format("node {} cannot listen on {}:{}: {}", spec.name, options.host, options.port,
                                 sys.render(port.error())));
      } else {
        member.port = *port;
        // Find and reach the coordinator's node, which may start after this one.
        std::string host = options.coordinator_host;
        std::uint16_t cport = options.coordinator_port;
        msg::coordinator_actor coordinator;
        bool waiting_said = false;
        std::string last_error;
        while (!coordinator && clock_type::now() < deadline && !(options.train.stop && options.train.stop->load())) {
          if (!options.rendezvous_file.empty()) {
            if (auto addr = read_rendezvous(options.rendezvous_file)) {
              host = addr->first;
              cport = addr->second;
            } else {
              host.clear();
            }
          }
          if (!host.empty()) {
            auto c = sys.middleman().remote_actor<msg::coordinator_actor>(host, cport);
            if (c) {
              coordinator = *c;
              break;
            }
            last_error = sys.render(c.error());
          }
          if (!waiting_said) {
            say(fmt::format("node {}: waiting for the coordinator at {}", spec.name,
                            host.empty() ? "the address in " + options.rendezvous_file
                                         : fmt::format("{}:{}", host, cport)));
            waiting_said = true;
          }
          std::this_thread::sleep_for(std::chrono::milliseconds(250));
        }
        if (!coordinator) {
          if (options.train.stop && options.train.stop->load()) {
            out.stopped = true;
          } else {
            out = failed(fmt::format("node {}: the coordinator at {} did not answer within {} s{}", spec.name,
                                     host.empty() ? options.rendezvous_file : fmt::format("{}:{}", host, cport),
                                     std::chrono::duration_cast<std::chrono::seconds>(ctx.limits.join).count(),
                                     last_error.empty() ? "" : " (" + last_error + ")"));
          }
        } else {
          std::optional<error> refused;
          self->request(coordinator, ctx.limits.request, msg::join_atom::value, member)
            .receive([](bool) {}, [&](caf::error& e) { refused = error{actors::error_text(sys, e)}; });
          if (refused) {
            out = failed(fmt::format("node {}: the coordinator refused it: {}", spec.name, refused->message));
          } else {
            say(fmt::format("node {}: joined the cluster (coordinator at {}:{})", spec.name, host, cport));
            self->monitor(coordinator);
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
  }
  actors::stop_roles(sys, nodes);
  return out;
}

} // namespace abg::node
