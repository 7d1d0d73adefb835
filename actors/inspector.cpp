#include "actors/inspector.h"

#include <string>

namespace abg::actors {

namespace {

msg::inspector_actor::behavior_type inspector(msg::inspector_actor::pointer self, msg::coordinator_actor coordinator) {
  self->monitor(coordinator);
  self->set_down_handler([self](const caf::down_msg&) { self->quit(); });
  return {
    [self, coordinator](msg::inspect_atom a, std::string& view) -> caf::delegated<std::string> {
      return self->delegate(coordinator, a, std::move(view));
    },
  };
}

} // namespace

msg::inspector_actor spawn_inspector(caf::actor_system& sys, const msg::coordinator_actor& coordinator) {
  return sys.spawn(inspector, coordinator);
}

} // namespace abg::actors
