// Parameter server shard: shared parameters by name. A push adds a delta and
// returns the sum, which replaces the trainer's local copy (PBG's protocol).
#include <chrono>
#include <map>

#include "actors/spawn.h"
#include "actors/traffic.h"

namespace abg::actors {
namespace {

using msg::tensor;

struct parameter_server_state {
  parameter_server_state() = default;  // not an aggregate: CAF would construct it from the actor pointer
  static inline const char* name = "abg.parameter_server";
  std::map<std::string, tensor> params;
  std::string label;
  msg::param_status counters; // names, bytes and seconds filled in when asked
  std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();
};

msg::parameter_server_actor::behavior_type parameter_server(
    msg::parameter_server_actor::stateful_pointer<parameter_server_state> self, std::string label) {
  self->state.label = std::move(label);
  return {
      [self](msg::push_atom, const std::string& name, const tensor& delta) -> caf::result<tensor> {
        auto n = msg::checked_numel(delta.shape);
        if (!n || *n != delta.numel()) return caf::make_error(caf::sec::invalid_argument, "bad delta tensor");
        auto& c = self->state.counters;
        ++c.pushes;
        c.pushed_bytes += *n * sizeof(float);
        c.pulled_bytes += *n * sizeof(float); // the sum goes back
        // A machine in another process: the delta came in, the sum goes back (the sharer counts its side).
        if (self->current_sender() && self->current_sender()->node() != self->node())
          traffic::count(traffic::kind::parameters, *n * sizeof(float), *n * sizeof(float), 1, 1);
        auto it = self->state.params.find(name);
        if (it == self->state.params.end()) {
          self->state.params.emplace(name, delta);
          return delta;
        }
        if (it->second.shape != delta.shape)
          return caf::make_error(caf::sec::invalid_argument, "delta shape differs for " + name);
        // Never modify a tensor that was sent: build the sum in a new buffer.
        auto old = it->second.values();
        auto add = delta.values();
        std::vector<float> sum(old.begin(), old.end());
        for (std::size_t i = 0; i < sum.size(); ++i) sum[i] += add[i];
        it->second = tensor::make(delta.shape, std::move(sum));
        return it->second;
      },
      [self](msg::pull_atom, const std::string& name) -> caf::result<tensor> {
        auto it = self->state.params.find(name);
        if (it == self->state.params.end())
          return caf::make_error(caf::sec::invalid_argument, self->state.label + ": unknown parameter " + name);
        ++self->state.counters.pulls;
        self->state.counters.pulled_bytes += it->second.numel() * sizeof(float);
        return it->second;
      },
      [self](msg::status_atom) -> msg::param_status {
        auto& st = self->state;
        auto out = st.counters;
        out.names = st.params.size();
        for (auto& [name, t] : st.params) out.bytes += t.numel() * sizeof(float);
        out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - st.started).count();
        return out;
      },
      [self](msg::clear_atom) -> bool {
        self->state.params.clear();
        return true;
      },
  };
}

}  // namespace

msg::parameter_server_actor spawn_parameter_server(caf::actor_system& sys, std::string label) {
  return sys.spawn(parameter_server, std::move(label));
}

}  // namespace abg::actors
