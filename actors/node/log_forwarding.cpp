#include "actors/node/log_forwarding.h"

#include <fmt/format.h>

#include "actors/run_log.h"

namespace abg::actors {

log_forwarding::log_forwarding(std::string node, std::function<void(std::string_view)> local)
    : node_(std::move(node)), local_(std::move(local)) {}

std::shared_ptr<log_forwarding> log_forwarding::make(std::string node, std::function<void(std::string_view)> local) {
  return std::shared_ptr<log_forwarding>(new log_forwarding(std::move(node), std::move(local)));
}

std::function<void(std::string_view)> log_forwarding::callback() {
  return [self = shared_from_this()](std::string_view line) {
    if (self->local_) self->local_(line);
    self->forward(line);
  };
}

node::train_callbacks log_forwarding::wrap(node::train_callbacks callbacks) {
  auto self = shared_from_this();
  callbacks.log = callback();
  callbacks.bucket_done = [self, next = std::move(callbacks.bucket_done)](const node::bucket_report& r) {
    if (next) next(r);
    self->record(fmt::format("bucket ({}, {}) of iteration {}/{} done by trainer {}: {} edges in {:.2f} s, loss {:.4f}; "
                             "{} of {} buckets",
                             r.lhs, r.rhs, r.iteration + 1, r.iterations, r.trainer, r.edges, r.seconds,
                             r.edges > 0 ? r.loss / static_cast<double>(r.edges) : 0.0, r.done, r.total));
  };
  callbacks.iteration_done = [self, next = std::move(callbacks.iteration_done)](const node::iteration_report& r) {
    if (next) next(r);
    self->record(fmt::format("iteration {}/{} (epoch {}, edge path {}, chunk {}) done: {} edges in {} bucket(s) in "
                             "{:.2f} s, loss {:.6f}; checkpoint version {}",
                             r.iteration + 1, r.iterations, r.epoch, r.edge_path, r.edge_chunk, r.edges, r.buckets,
                             r.seconds, r.loss, r.checkpoint_version));
  };
  return callbacks;
}

void log_forwarding::record(std::string_view text) { forward(text); }

void log_forwarding::forward(std::string_view text) {
  msg::log_line line{node_, run_log::now_micros(), std::string(text)};
  std::lock_guard lock(mutex_);
  if (coordinator_) {
    caf::anon_send(coordinator_, msg::log_atom::value, std::move(line));
    return;
  }
  if (waiting_.size() == max_waiting) waiting_.erase(waiting_.begin());
  waiting_.push_back(std::move(line));
}

void log_forwarding::connect(msg::coordinator_actor coordinator) {
  std::lock_guard lock(mutex_);
  coordinator_ = std::move(coordinator);
  for (auto& line : waiting_) caf::anon_send(coordinator_, msg::log_atom::value, std::move(line));
  waiting_.clear();
}

} // namespace abg::actors
