// Trainer: acquire -> run the kernel on its own worker thread -> release, until
// the lock server says the epoch is done. The actor itself only reacts to
// messages, so it answers status requests while a bucket trains.
#include <exception>
#include <optional>
#include <thread>

#include "actors/interfaces.h"

namespace abg::actors {
namespace {

struct trainer_state {
  trainer_state() = default;  // not an aggregate: CAF would construct it from the actor pointer
  static inline const char* name = "abg.trainer";
  uint32_t id = 0;
  lock_server_actor lock;
  kernel_fn kernel;
  std::optional<caf::typed_response_promise<uint32_t>> run_promise;
  int32_t epoch = 0;
  uint32_t trained_this_run = 0;
  uint32_t trained_total = 0;
  bool busy = false;
  bucket current{};
  std::optional<bucket> previous;
  uint64_t token = 0;
  // Declared last: destroyed (stop requested, joined) first when the actor exits.
  std::jthread worker;
};

using trainer_pointer = trainer_actor::stateful_pointer<trainer_state>;

void acquire_next(trainer_pointer self);

void start_kernel(trainer_pointer self, bucket b) {
  auto& st = self->state;
  if (st.worker.joinable()) st.worker.join();  // the previous job has finished
  st.busy = true;
  st.current = b;
  const uint64_t token = ++st.token;
  kernel_job job{st.id, st.epoch, b};
  trainer_actor me = caf::actor_cast<trainer_actor>(self);
  st.worker = std::jthread([kernel = st.kernel, job, token, me](std::stop_token stop) {
    bucket_stats stats;
    bool ok = true;
    try {
      stats = kernel(job, stop);
    } catch (...) {
      ok = false;
    }
    if (stop.stop_requested()) return;
    stats.trainer = job.trainer;
    stats.epoch = job.epoch;
    stats.trained = job.assigned;
    caf::anon_send(me, msg::kernel_done_atom::value, token, ok, stats);
  });
}

void acquire_next(trainer_pointer self) {
  auto& st = self->state;
  const bool has_prev = st.previous.has_value();
  self->request(st.lock, caf::infinite, msg::acquire_atom::value, st.id, st.previous.value_or(bucket{}), has_prev)
      .then(
          [self](acquire_result r) {
            auto& s = self->state;
            if (!s.run_promise) return;
            if (r.what == acquire_result::kind::bucket) {
              start_kernel(self, r.assigned);
            } else if (r.what == acquire_result::kind::done) {
              s.run_promise->deliver(s.trained_this_run);
              s.run_promise.reset();
            } else {
              s.run_promise->deliver(caf::make_error(caf::sec::unexpected_response, "lock server said wait"));
              s.run_promise.reset();
            }
          },
          [self](caf::error& err) {
            auto& s = self->state;
            if (s.run_promise) s.run_promise->deliver(std::move(err));
            s.run_promise.reset();
          });
}

trainer_actor::behavior_type trainer(trainer_pointer self, uint32_t id, lock_server_actor lock, kernel_fn kernel) {
  self->state.id = id;
  self->state.lock = std::move(lock);
  self->state.kernel = std::move(kernel);
  return {
      [self](msg::run_atom, int32_t epoch) -> caf::result<uint32_t> {
        auto& st = self->state;
        if (st.run_promise || st.busy)
          return caf::make_error(caf::sec::runtime_error, "trainer is already running an epoch");
        st.epoch = epoch;
        st.trained_this_run = 0;
        st.run_promise = self->make_response_promise<uint32_t>();
        auto promise = *st.run_promise;
        acquire_next(self);
        return promise;
      },
      [self](msg::status_atom) -> trainer_status {
        auto& st = self->state;
        return {st.id, st.busy, st.current, st.trained_total};
      },
      [self](msg::kernel_done_atom, uint64_t token, bool ok, bucket_stats stats) {
        auto& st = self->state;
        if (token != st.token || !st.busy) return;
        if (st.worker.joinable()) st.worker.join();
        st.busy = false;
        if (!ok) {  // the lock server re-queues the bucket when it sees us go down
          self->quit(caf::make_error(caf::sec::runtime_error, "bucket kernel failed"));
          return;
        }
        ++st.trained_this_run;
        ++st.trained_total;
        st.previous = stats.trained;
        self->request(st.lock, caf::infinite, msg::release_atom::value, stats)
            .then([self](bool) { acquire_next(self); },
                  [self](caf::error& err) {
                    auto& s = self->state;
                    if (s.run_promise) s.run_promise->deliver(std::move(err));
                    s.run_promise.reset();
                  });
      },
  };
}

}  // namespace

trainer_actor spawn_trainer(caf::actor_system& sys, uint32_t id, lock_server_actor lock, kernel_fn kernel) {
  return sys.spawn(trainer, id, std::move(lock), std::move(kernel));
}

}  // namespace abg::actors
