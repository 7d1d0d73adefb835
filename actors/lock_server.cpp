// Lock server: wraps bucket_scheduler; parks acquire requests that have no
// allowed bucket yet; monitors trainers and takes back a dead one's bucket.
#include <deque>
#include <map>
#include <optional>

#include "actors/interfaces.h"

namespace abg::actors {
namespace {

struct parked_acquire {
  uint32_t trainer;
  std::optional<bucket> previous;
  caf::typed_response_promise<acquire_result> promise;
};

struct lock_server_state {
  lock_server_state() = default;  // not an aggregate: CAF would construct it from the actor pointer
  static inline const char* name = "abg.lock_server";
  std::optional<bucket_scheduler> scheduler;
  std::deque<parked_acquire> parked;
  std::vector<caf::typed_response_promise<epoch_stats>> epoch_waiters;
  std::map<caf::actor_addr, uint32_t> trainer_of;
  epoch_stats stats;
};

using lock_pointer = lock_server_actor::stateful_pointer<lock_server_state>;

void serve_parked(lock_pointer self) {
  auto& st = self->state;
  for (auto it = st.parked.begin(); it != st.parked.end();) {
    auto r = st.scheduler->acquire(it->trainer, it->previous);
    if (r.what == acquire_result::kind::wait) {
      ++it;
      continue;
    }
    it->promise.deliver(r);
    it = st.parked.erase(it);
  }
}

void finish_epoch_if_done(lock_pointer self) {
  auto& st = self->state;
  if (!st.scheduler->epoch_started() || !st.scheduler->epoch_done()) return;
  for (auto& p : st.epoch_waiters) p.deliver(st.stats);
  st.epoch_waiters.clear();
}

lock_server_actor::behavior_type lock_server(lock_pointer self, scheduler_config config) {
  self->state.scheduler.emplace(config);
  self->set_down_handler([self](caf::down_msg& dm) {
    auto& st = self->state;
    auto it = st.trainer_of.find(dm.source);
    if (it == st.trainer_of.end()) return;
    const uint32_t trainer = it->second;
    st.trainer_of.erase(it);
    std::erase_if(st.parked, [&](const parked_acquire& p) { return p.trainer == trainer; });
    if (st.scheduler->trainer_died(trainer)) ++st.stats.requeued;
    serve_parked(self);
  });
  return {
      [self](msg::start_atom, int32_t epoch) -> bool {
        auto& st = self->state;
        try {
          st.scheduler->start_epoch(epoch);
        } catch (const std::logic_error&) {
          return false;
        }
        st.stats = epoch_stats{};
        st.stats.epoch = epoch;
        serve_parked(self);
        return true;
      },
      [self](msg::acquire_atom, uint32_t trainer, bucket previous,
             bool has_previous) -> caf::result<acquire_result> {
        auto& st = self->state;
        if (auto& sender = self->current_sender()) {
          auto addr = caf::actor_cast<caf::actor_addr>(sender);
          if (!st.trainer_of.contains(addr)) {
            st.trainer_of.emplace(addr, trainer);
            self->monitor(sender);
          }
        }
        std::optional<bucket> prev;
        if (has_previous) prev = previous;
        auto r = st.scheduler->acquire(trainer, prev);
        if (r.what != acquire_result::kind::wait) return r;
        auto promise = self->make_response_promise<acquire_result>();
        st.parked.push_back({trainer, prev, promise});
        return promise;
      },
      [self](msg::release_atom, bucket_stats s) -> bool {
        auto& st = self->state;
        if (!st.scheduler->release(s.trainer, s.trained)) return false;
        ++st.stats.buckets;
        st.stats.edges += s.edges;
        st.stats.loss += s.loss;
        st.stats.seconds += s.seconds;
        st.stats.per_bucket.push_back(s);
        serve_parked(self);
        finish_epoch_if_done(self);
        return true;
      },
      [self](msg::epoch_done_atom) -> caf::result<epoch_stats> {
        auto& st = self->state;
        if (st.scheduler->epoch_started() && st.scheduler->epoch_done()) return st.stats;
        auto promise = self->make_response_promise<epoch_stats>();
        st.epoch_waiters.push_back(promise);
        return promise;
      },
  };
}

}  // namespace

lock_server_actor spawn_lock_server(caf::actor_system& sys, scheduler_config config) {
  bucket_scheduler check(config);  // throws std::invalid_argument on a bad config, here
  return sys.spawn(lock_server, config);
}

}  // namespace abg::actors
