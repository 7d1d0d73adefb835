#include "actors/node/system_config.h"

#include <caf/io/all.hpp>

#include "messages/interfaces.h"

namespace abg::actors {

void configure_system(caf::actor_system_config& cfg, const cluster_spec* spec) {
  msg::register_message_types(cfg);
  cfg.set("scheduler.max-threads", 2);
  // Not CAF's default work stealing: its idle threads poll (hundreds of tries,
  // 50 us apart, before sleeping), which took a fifth to a third of the
  // training kernels' CPU on 2 cores (bench/results.md, cluster, 2026-12-02).
  // Roles exchange few, large messages: one shared queue is plenty.
  cfg.set("scheduler.policy", caf::atom("sharing"));
  cfg.set("logger.console", caf::atom("none"));
  if (spec) {
    cfg.load<caf::io::middleman>();
    cfg.set("middleman.heartbeat-interval", caf::timespan{spec->heartbeat_interval});
    cfg.set("middleman.connection-timeout", caf::timespan{spec->heartbeat_timeout});
  }
}

} // namespace abg::actors
