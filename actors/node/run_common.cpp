#include "actors/node/run_common.h"

#include <random>

#include <caf/io/all.hpp>

namespace abg::actors {

deadlines deadlines_of(const cluster_spec& spec) {
  deadlines d;
  d.request = spec.request_timeout;
  d.join = spec.join_timeout;
  d.server_wait = spec.server_wait;
  d.heartbeat = spec.heartbeat_timeout;
  return d;
}

std::uint64_t run_seed(const node::train_options& options) {
  return options.seed ? *options.seed : std::random_device{}() * 0x100000001ULL ^ std::random_device{}();
}

node::train_summary to_summary(const msg::run_summary& s) {
  node::train_summary out;
  out.seed = s.seed;
  out.iterations_run = s.iterations_run;
  out.first_iteration = s.first_iteration;
  out.edges = s.edges;
  out.seconds = s.seconds;
  out.checkpoint_version = s.checkpoint_version;
  out.stopped = s.stopped;
  out.stopped_by_console = s.stopped_by_console != 0;
  if (s.early_stopped_epoch >= 0)
    out.early_stopped_epoch = s.early_stopped_epoch;
  out.rollbacks = s.rollbacks;
  out.buckets_per_trainer = s.buckets_per_trainer;
  return out;
}

expected<node::train_summary> wait_for_run(caf::actor_system& sys, const msg::coordinator_actor& coordinator,
                                           const std::atomic<bool>* stop) {
  caf::scoped_actor self{sys};
  // A plain send: the answer arrives as a message, so the wait can also
  // watch the stop flag.
  self->send(coordinator, msg::run_atom::value);
  std::optional<expected<node::train_summary>> result;
  bool stop_sent = false;
  self->monitor(coordinator);
  while (!result) {
    self->receive([&](msg::run_summary& s) { result = to_summary(s); },
                  [&](caf::error& e) { result = std::unexpected(error{error_text(sys, e)}); },
                  [&](caf::down_msg& dm) {
                    result = std::unexpected(error{"the coordinator is gone: " + sys.render(dm.reason)});
                  },
                  [&](bool) {}, // the stop's acknowledgement
                  caf::after(std::chrono::milliseconds(50)) >> [&] {
                    if (stop && stop->load() && !stop_sent) {
                      stop_sent = true;
                      self->send(coordinator, msg::stop_atom::value);
                    }
                  });
  }
  return *result;
}

} // namespace abg::actors
