// Coordinator: runs epochs over the lock server with N trainers; after each
// epoch calls on_epoch (checkpoint, logs) and starts the next.
#include <set>

#include "actors/interfaces.h"

namespace abg::actors {
namespace {

struct coordinator_state {
  coordinator_state() = default;  // not an aggregate: CAF would construct it from the actor pointer
  static inline const char* name = "abg.coordinator";
  lock_server_actor lock;
  std::vector<trainer_actor> trainers;
  std::set<caf::actor_addr> alive;
  std::function<void(const epoch_stats&)> on_epoch;
  std::optional<caf::typed_response_promise<std::vector<epoch_stats>>> promise;
  std::vector<epoch_stats> results;
  int32_t end = 0;
};

using coordinator_pointer = coordinator_actor::stateful_pointer<coordinator_state>;

void fail(coordinator_pointer self, caf::error err) {
  auto& st = self->state;
  if (st.promise) st.promise->deliver(std::move(err));
  st.promise.reset();
}

void run_epoch(coordinator_pointer self, int32_t epoch) {
  auto& st = self->state;
  if (!st.promise) return;
  if (epoch >= st.end) {
    st.promise->deliver(std::move(st.results));
    st.promise.reset();
    st.results.clear();
    return;
  }
  self->request(st.lock, caf::infinite, msg::start_atom::value, epoch)
      .then(
          [self, epoch](bool ok) {
            auto& s = self->state;
            if (!ok) return fail(self, caf::make_error(caf::sec::runtime_error, "lock server refused the epoch"));
            for (auto& t : s.trainers) {
              if (!s.alive.contains(t.address())) continue;
              // A trainer's own answer is informational; the lock server decides.
              self->request(t, caf::infinite, msg::run_atom::value, epoch).then([](uint32_t) {}, [](caf::error&) {});
            }
            self->request(s.lock, caf::infinite, msg::epoch_done_atom::value)
                .then(
                    [self, epoch](epoch_stats stats) {
                      auto& s2 = self->state;
                      if (s2.on_epoch) s2.on_epoch(stats);
                      s2.results.push_back(std::move(stats));
                      run_epoch(self, epoch + 1);
                    },
                    [self](caf::error& err) { fail(self, std::move(err)); });
          },
          [self](caf::error& err) { fail(self, std::move(err)); });
}

coordinator_actor::behavior_type coordinator(coordinator_pointer self, lock_server_actor lock,
                                             std::vector<trainer_actor> trainers,
                                             std::function<void(const epoch_stats&)> on_epoch) {
  auto& st = self->state;
  st.lock = std::move(lock);
  st.trainers = std::move(trainers);
  st.on_epoch = std::move(on_epoch);
  for (auto& t : st.trainers) {
    st.alive.insert(t.address());
    self->monitor(t);
  }
  self->set_down_handler([self](caf::down_msg& dm) {
    auto& s = self->state;
    s.alive.erase(dm.source);
    if (s.alive.empty()) fail(self, caf::make_error(caf::sec::runtime_error, "every trainer is down"));
  });
  return {
      [self](msg::run_epochs_atom, int32_t first, int32_t count) -> caf::result<std::vector<epoch_stats>> {
        auto& s = self->state;
        if (s.promise) return caf::make_error(caf::sec::runtime_error, "epochs already running");
        if (count < 0) return caf::make_error(caf::sec::invalid_argument, "negative epoch count");
        if (s.alive.empty()) return caf::make_error(caf::sec::runtime_error, "no trainer is alive");
        s.end = first + count;
        s.results.clear();
        s.promise = self->make_response_promise<std::vector<epoch_stats>>();
        auto promise = *s.promise;
        run_epoch(self, first);
        return promise;
      },
  };
}

}  // namespace

coordinator_actor spawn_coordinator(caf::actor_system& sys, lock_server_actor lock, std::vector<trainer_actor> trainers,
                                    std::function<void(const epoch_stats&)> on_epoch) {
  return sys.spawn(coordinator, std::move(lock), std::move(trainers), std::move(on_epoch));
}

}  // namespace abg::actors
