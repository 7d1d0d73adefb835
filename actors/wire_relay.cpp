// Wire relays (see wire_relay.h).
#include "actors/wire_relay.h"

#include <tuple>
#include <utility>
#include <vector>

namespace abg::actors {

namespace {

// xs through CAF's binary serializer and back into fresh values.
template <class... Ts>
caf::expected<std::tuple<Ts...>> wire_copy(caf::actor_system& sys, const Ts&... xs) {
  std::tuple<Ts...> out;
  if constexpr (sizeof...(Ts) > 0) {
    std::vector<char> buf;
    caf::binary_serializer sink{sys, buf};
    if (auto err = sink(const_cast<Ts&>(xs)...))
      return err;
    caf::binary_deserializer source{sys, buf};
    if (auto err = std::apply([&](auto&... ys) { return source(ys...); }, out))
      return err;
  }
  return out;
}

// Forwards (atom, xs...) to target after a wire copy, and the reply back
// after another.
template <class Result, class Self, class Target, class Atom, class... Ts>
caf::result<Result> relay(Self* self, const Target& target, Atom atom, const Ts&... xs) {
  auto in = wire_copy(self->system(), xs...);
  if (!in)
    return std::move(in.error());
  auto promise = self->template make_response_promise<Result>();
  std::apply(
    [&](auto&... ys) {
      self->request(target, caf::infinite, atom, std::move(ys)...)
        .then(
          [self, promise](Result& r) mutable {
            auto out = wire_copy(self->system(), r);
            if (out)
              promise.deliver(std::move(std::get<0>(*out)));
            else
              promise.deliver(std::move(out.error()));
          },
          [promise](caf::error& e) mutable { promise.deliver(std::move(e)); });
    },
    *in);
  return promise;
}

partition_server_actor::behavior_type partition_relay(partition_server_actor::pointer self,
                                                      partition_server_actor target) {
  self->link_to(target);
  return {
    [=](msg::get_atom a, const partition_key& k, uint64_t row, uint64_t rows) {
      return relay<partition_chunk>(self, target, a, k, row, rows);
    },
    [=](msg::put_atom a, const partition_chunk& c) { return relay<bool>(self, target, a, c); },
    [=](msg::status_atom a) { return relay<uint64_t>(self, target, a); },
  };
}

lock_server_actor::behavior_type lock_relay(lock_server_actor::pointer self, lock_server_actor target) {
  self->link_to(target);
  return {
    [=](msg::start_atom a, int32_t epoch) { return relay<bool>(self, target, a, epoch); },
    [=](msg::acquire_atom a, uint32_t trainer, bucket previous, bool has_previous) {
      return relay<acquire_result>(self, target, a, trainer, previous, has_previous);
    },
    [=](msg::release_atom a, const bucket_stats& s) { return relay<bool>(self, target, a, s); },
    [=](msg::epoch_done_atom a) { return relay<epoch_stats>(self, target, a); },
  };
}

parameter_server_actor::behavior_type parameter_relay(parameter_server_actor::pointer self,
                                                      parameter_server_actor target) {
  self->link_to(target);
  return {
    [=](msg::push_atom a, const std::string& name, const tensor& delta) {
      return relay<tensor>(self, target, a, name, delta);
    },
    [=](msg::pull_atom a, const std::string& name) { return relay<tensor>(self, target, a, name); },
  };
}

trainer_actor::behavior_type trainer_relay(trainer_actor::pointer self, trainer_actor target) {
  self->link_to(target);
  return {
    [=](msg::run_atom a, int32_t epoch) { return relay<uint32_t>(self, target, a, epoch); },
    [=](msg::status_atom a) { return relay<trainer_status>(self, target, a); },
    // Only the trainer's own worker thread sends this; forwarded for completeness of the interface.
    [=](msg::kernel_done_atom a, uint64_t token, bool ok, const bucket_stats& s) {
      if (auto in = wire_copy(self->system(), token, ok, s))
        std::apply([&](auto&... ys) { self->send(target, a, std::move(ys)...); }, *in);
    },
  };
}

coordinator_actor::behavior_type coordinator_relay(coordinator_actor::pointer self, coordinator_actor target) {
  self->link_to(target);
  return {
    [=](msg::run_epochs_atom a, int32_t first, int32_t count) {
      return relay<std::vector<epoch_stats>>(self, target, a, first, count);
    },
  };
}

} // namespace

trainer_actor spawn_wire_relay(caf::actor_system& sys, trainer_actor target) {
  return sys.spawn(trainer_relay, std::move(target));
}

coordinator_actor spawn_wire_relay(caf::actor_system& sys, coordinator_actor target) {
  return sys.spawn(coordinator_relay, std::move(target));
}

parameter_server_actor spawn_wire_relay(caf::actor_system& sys, parameter_server_actor target) {
  return sys.spawn(parameter_relay, std::move(target));
}

partition_server_actor spawn_wire_relay(caf::actor_system& sys, partition_server_actor target) {
  return sys.spawn(partition_relay, std::move(target));
}

lock_server_actor spawn_wire_relay(caf::actor_system& sys, lock_server_actor target) {
  return sys.spawn(lock_relay, std::move(target));
}

} // namespace abg::actors
