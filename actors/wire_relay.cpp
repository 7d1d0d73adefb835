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

msg::partition_server_actor::behavior_type partition_relay(msg::partition_server_actor::pointer self,
                                                           msg::partition_server_actor target) {
  self->link_to(target);
  return {
    [=](msg::get_atom a, const msg::partition_key& k, uint64_t min_version, uint64_t row, uint64_t rows) {
      return relay<msg::partition_chunk>(self, target, a, k, min_version, row, rows);
    },
    [=](msg::put_atom a, const msg::partition_chunk& c) { return relay<bool>(self, target, a, c); },
    [=](msg::abort_atom a, const msg::partition_key& k, uint64_t version) {
      return relay<bool>(self, target, a, k, version);
    },
    [=](msg::list_atom a) { return relay<std::vector<msg::partition_info>>(self, target, a); },
    [=](msg::clear_atom a) { return relay<bool>(self, target, a); },
    [=](msg::save_atom a, const msg::table_save& job) {
      return relay<std::vector<msg::table_file>>(self, target, a, job);
    },
    [=](msg::restore_atom a, const msg::table_restore& job) { return relay<bool>(self, target, a, job); },
    [=](msg::prune_atom a, const std::vector<std::string>& keep) { return relay<bool>(self, target, a, keep); },
    // The server's own job thread never talks to it through a relay.
    [=](msg::job_done_atom, uint64_t) {},
  };
}

msg::lock_server_actor::behavior_type lock_relay(msg::lock_server_actor::pointer self, msg::lock_server_actor target) {
  self->link_to(target);
  return {
    [=](msg::subscribe_atom a, const msg::events_actor& e) { return relay<bool>(self, target, a, e); },
    [=](msg::start_atom a, int32_t epoch, const std::vector<msg::bucket>& done) {
      return relay<bool>(self, target, a, epoch, done);
    },
    [=](msg::pause_atom a, bool on) { return relay<bool>(self, target, a, on); },
    [=](msg::reset_atom a, uint64_t version) { return relay<bool>(self, target, a, version); },
    [=](msg::enroll_atom a, uint32_t trainer, const caf::actor_addr& who) {
      return relay<bool>(self, target, a, trainer, who);
    },
    [=](msg::leave_atom a, uint32_t trainer) { return relay<bool>(self, target, a, trainer); },
    [=](msg::acquire_atom a, uint32_t trainer) { return relay<msg::grant>(self, target, a, trainer); },
    [=](msg::unlock_atom a, uint32_t trainer, const std::vector<msg::part_version>& written) {
      return relay<bool>(self, target, a, trainer, written);
    },
    [=](msg::handed_atom a, uint32_t trainer) { return relay<std::vector<msg::part_version>>(self, target, a, trainer); },
    [=](msg::release_atom a, const msg::bucket_stats& s) { return relay<bool>(self, target, a, s); },
    // The lock server's own timer never comes from outside.
    [=](msg::tick_atom) {},
  };
}

msg::parameter_server_actor::behavior_type parameter_relay(msg::parameter_server_actor::pointer self,
                                                           msg::parameter_server_actor target) {
  self->link_to(target);
  return {
    [=](msg::push_atom a, const std::string& name, const msg::tensor& delta) {
      return relay<msg::tensor>(self, target, a, name, delta);
    },
    [=](msg::pull_atom a, const std::string& name) { return relay<msg::tensor>(self, target, a, name); },
    [=](msg::clear_atom a) { return relay<bool>(self, target, a); },
    [=](msg::status_atom a) { return relay<msg::param_status>(self, target, a); },
  };
}

} // namespace

msg::parameter_server_actor spawn_wire_relay(caf::actor_system& sys, msg::parameter_server_actor target) {
  return sys.spawn(parameter_relay, std::move(target));
}

msg::partition_server_actor spawn_wire_relay(caf::actor_system& sys, msg::partition_server_actor target) {
  return sys.spawn(partition_relay, std::move(target));
}

msg::lock_server_actor spawn_wire_relay(caf::actor_system& sys, msg::lock_server_actor target) {
  return sys.spawn(lock_relay, std::move(target));
}

} // namespace abg::actors
