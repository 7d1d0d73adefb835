// Lock server: wraps the bucket scheduler (runtime/schedule); parks acquire
// requests that have nothing allowed yet (answering `wait` once they are old,
// so no trainer hangs on it); monitors the enrolled trainers and takes back a
// dead one's locks and buckets; tells the coordinator what happens.
#include <chrono>
#include <deque>
#include <map>
#include <optional>

#include "actors/spawn.h"
#include "runtime/schedule/serve_parked.h"

namespace abg::actors {
namespace {

using msg::bucket_stats;
using msg::grant;
using clock_type = std::chrono::steady_clock;

struct parked_acquire {
  uint32_t trainer;
  clock_type::time_point since;
  caf::typed_response_promise<grant> promise;
};

struct lock_server_state {
  lock_server_state() = default;  // not an aggregate: CAF would construct it from the actor pointer
  static inline const char* name = "abg.lock_server";
  std::optional<schedule::bucket_scheduler> scheduler;
  deadlines limits;
  std::deque<parked_acquire> parked;
  bool ticking = false;
  std::map<uint32_t, caf::actor_addr> trainers;
  msg::events_actor events;
  int32_t announced_epoch = -1;  // epoch_done sent for this epoch
  // pause(true) requests, answered once drained.
  std::vector<caf::typed_response_promise<bool>> drain_waiters;
};

using lock_pointer = msg::lock_server_actor::stateful_pointer<lock_server_state>;

// Paused and nothing held any more: the pause requests are answered.
void answer_drained(lock_pointer self) {
  auto& st = self->state;
  if (st.drain_waiters.empty() || !st.scheduler->paused() || !st.scheduler->drained()) return;
  for (auto& p : st.drain_waiters) p.deliver(true);
  st.drain_waiters.clear();
}

void announce_if_done(lock_pointer self) {
  auto& st = self->state;
  answer_drained(self);
  if (!st.scheduler->epoch_done() || st.announced_epoch == st.scheduler->epoch()) return;
  st.announced_epoch = st.scheduler->epoch();
  if (st.events) self->send(st.events, msg::epoch_done_atom::value, st.scheduler->epoch());
}

// schedule::serve_parked: in the order they asked, and no more after a
// `wait` to one that does not wait alone.
void serve_parked(lock_pointer self) {
  auto& st = self->state;
  schedule::serve_parked(
    *st.scheduler, st.parked, [](const parked_acquire& p) { return p.trainer; },
    [&](parked_acquire& p) {
      auto g = st.scheduler->acquire(p.trainer);
      if (g.what == grant::kind::wait) return false;
      p.promise.deliver(std::move(g));
      return true;
    });
}

void schedule_tick(lock_pointer self) {
  auto& st = self->state;
  if (st.ticking || st.parked.empty()) return;
  st.ticking = true;
  self->delayed_send(self, st.limits.park / 2, msg::tick_atom::value);
}

void trainer_gone(lock_pointer self, uint32_t trainer) {
  auto& st = self->state;
  std::erase_if(st.parked, [&](const parked_acquire& p) { return p.trainer == trainer; });
  auto requeued = st.scheduler->trainer_died(trainer);
  if (st.events) self->send(st.events, msg::requeued_atom::value, trainer, requeued);
  serve_parked(self);
  announce_if_done(self);
}

msg::lock_server_actor::behavior_type lock_server(lock_pointer self, schedule::scheduler_config config,
                                                  deadlines limits) {
  self->state.scheduler.emplace(config);
  self->state.limits = limits;
  self->set_down_handler([self](caf::down_msg& dm) {
    auto& st = self->state;
    for (auto it = st.trainers.begin(); it != st.trainers.end(); ++it)
      if (it->second == dm.source) {
        auto id = it->first;
        st.trainers.erase(it);
        trainer_gone(self, id);
        return;
      }
  });
  return {
      [self](msg::subscribe_atom, msg::events_actor events) {
        self->state.events = std::move(events);
        return true;
      },
      [self](msg::start_atom, int32_t epoch, const std::vector<msg::bucket>& done) -> bool {
        auto& st = self->state;
        try {
          st.scheduler->start_epoch(epoch, done);
        } catch (const std::logic_error&) { // also std::invalid_argument: a bucket off the grid
          return false;
        }
        st.announced_epoch = -1;
        serve_parked(self);
        announce_if_done(self);  // an empty grid is done at once
        return true;
      },
      [self](msg::reset_atom, uint64_t version) -> bool {
        auto& st = self->state;
        st.scheduler->reset(version);
        st.announced_epoch = -1;
        for (auto& p : st.parked) p.promise.deliver(grant{});  // wait: ask again
        st.parked.clear();
        answer_drained(self);
        return true;
      },
      [self](msg::pause_atom, bool on) -> caf::result<bool> {
        auto& st = self->state;
        st.scheduler->set_paused(on);
        if (!on) {
          for (auto& p : st.drain_waiters) p.deliver(false);
          st.drain_waiters.clear();
          serve_parked(self);
          return true;
        }
        // A parked trainer waiting for what its reservation awaits holds
        // partitions: told now to write them back, not after its park.
        serve_parked(self);
        if (st.scheduler->drained()) return true;
        // Trainers holding partitions but asking nothing now are told to
        // write them back at their next acquire; parked ones hold nothing.
        st.drain_waiters.push_back(self->make_response_promise<bool>());
        return st.drain_waiters.back();
      },
      [self](msg::enroll_atom, uint32_t trainer, caf::actor_addr who) -> bool {
        auto& st = self->state;
        if (auto it = st.trainers.find(trainer); it != st.trainers.end()) {
          if (it->second == who) return true;
          // A trainer of that id again (its node came back): the old one is gone.
          self->demonitor(it->second);
          st.trainers.erase(it);
          trainer_gone(self, trainer);
        }
        st.trainers.emplace(trainer, who);
        self->monitor(who);
        return true;
      },
      [self](msg::leave_atom, uint32_t trainer) -> bool {
        auto& st = self->state;
        auto it = st.trainers.find(trainer);
        if (it == st.trainers.end()) return false;
        self->demonitor(it->second);
        st.trainers.erase(it);
        trainer_gone(self, trainer);
        return true;
      },
      [self](msg::acquire_atom, uint32_t trainer) -> caf::result<grant> {
        auto& st = self->state;
        if (!st.trainers.contains(trainer))
          return caf::make_error(caf::sec::invalid_argument, "trainer " + std::to_string(trainer) + " is not enrolled");
        // A trainer that asks again gave up on its earlier request.
        std::erase_if(st.parked, [&](const parked_acquire& p) { return p.trainer == trainer; });
        auto g = st.scheduler->acquire(trainer);
        if (g.what != grant::kind::wait) return g;
        auto promise = self->make_response_promise<grant>();
        st.parked.push_back({trainer, clock_type::now(), promise});
        schedule_tick(self);
        return promise;
      },
      [self](msg::unlock_atom, uint32_t trainer, const std::vector<schedule::part_version>& written) -> bool {
        auto& st = self->state;
        if (!st.scheduler->unlock(trainer, written)) return false;
        serve_parked(self);
        announce_if_done(self);
        return true;
      },
      [self](msg::handed_atom, uint32_t trainer) -> std::vector<schedule::part_version> {
        return self->state.scheduler->take_handed(trainer);
      },
      [self](msg::release_atom, const bucket_stats& s) -> bool {
        auto& st = self->state;
        if (!st.scheduler->release(s.trainer, s.trained)) return false;
        if (st.events) self->send(st.events, msg::released_atom::value, s);
        serve_parked(self);
        announce_if_done(self);
        return true;
      },
      [self](msg::tick_atom) {
        auto& st = self->state;
        st.ticking = false;
        const auto now = clock_type::now();
        for (auto it = st.parked.begin(); it != st.parked.end();) {
          if (now - it->since < st.limits.park) {
            ++it;
            continue;
          }
          it->promise.deliver(grant{});  // wait: ask again
          it = st.parked.erase(it);
        }
        schedule_tick(self);
      },
  };
}

}  // namespace

msg::lock_server_actor spawn_lock_server(caf::actor_system& sys, schedule::scheduler_config config,
                                         deadlines limits) {
  schedule::bucket_scheduler check(config);  // throws std::invalid_argument on a bad config, here
  return sys.spawn(lock_server, config, limits);
}

}  // namespace abg::actors
