#include "actors/inspector.h"

#include <chrono>
#include <map>
#include <set>
#include <string>

#include <fmt/format.h>

#include "messages/admin_proof.h"

namespace abg::actors {

namespace {

using clock_type = std::chrono::steady_clock;

// A nonce is good for one command within this time; at most this many are
// outstanding (the oldest goes first), so a console asking for nonces and
// never using them costs a bounded amount of memory.
constexpr auto nonce_life = std::chrono::seconds(60);
constexpr std::size_t max_nonces = 64;

struct inspector_state {
  inspector_state() = default; // not an aggregate: CAF would construct it from the actor pointer
  static inline const char* name = "abg.inspector";
  std::optional<cluster_token> admin;
  std::function<void(const std::string&)> log;
  std::map<std::string, clock_type::time_point> nonces; // handed out -> when
  // Consoles that sent stop, until they detach: the node waits for them
  // (linger) so that it does not exit with their answer unsent.
  std::set<caf::actor_addr> told_to_leave;
  std::vector<caf::typed_response_promise<bool>> lingering;
};

using inspector_pointer = msg::inspector_actor::stateful_pointer<inspector_state>;

std::string peer_of(inspector_pointer self) {
  const auto& sender = self->current_sender();
  return sender ? fmt::format("node {}", to_string(sender->node())) : std::string("an anonymous sender");
}

caf::error refuse(inspector_pointer self, const std::string& why) {
  if (self->state.log) self->state.log(fmt::format("refused an admin command from {}: {}", peer_of(self), why));
  return caf::make_error(caf::sec::invalid_argument, why);
}

// The console no longer holds up the node's exit (it detached, or its stop was refused).
void let_go(inspector_pointer self, const caf::actor_addr& console) {
  auto& st = self->state;
  st.told_to_leave.erase(console);
  if (!st.told_to_leave.empty()) return;
  for (auto& p : st.lingering) p.deliver(true);
  st.lingering.clear();
}

msg::inspector_actor::behavior_type inspector(inspector_pointer self, msg::coordinator_actor coordinator,
                                              std::optional<cluster_token> admin,
                                              std::function<void(const std::string&)> log) {
  self->state.admin = std::move(admin);
  self->state.log = std::move(log);
  self->monitor(coordinator);
  self->set_down_handler([self, run = coordinator.address()](const caf::down_msg& dm) {
    if (dm.source == run) return self->quit();
    let_go(self, dm.source);
  });
  return {
    [self, coordinator](msg::inspect_atom a, std::string& view) -> caf::delegated<std::string> {
      return self->delegate(coordinator, a, std::move(view));
    },
    [self](msg::challenge_atom) -> caf::result<std::string> {
      auto& st = self->state;
      if (!st.admin)
        return caf::make_error(caf::sec::invalid_argument,
                               "this run has no admin token, so no console may steer it (start it with "
                               "cluster.admin_token_file in the cluster file, or --admin-token-file FILE)");
      const auto now = clock_type::now();
      std::erase_if(st.nonces, [&](const auto& n) { return now - n.second > nonce_life; });
      while (st.nonces.size() >= max_nonces)
        st.nonces.erase(std::min_element(st.nonces.begin(), st.nonces.end(),
                                         [](const auto& a, const auto& b) { return a.second < b.second; }));
      auto nonce = msg::admin::fresh_nonce_hex();
      if (!nonce) return caf::make_error(caf::sec::runtime_error, "cannot draw a random nonce (OpenSSL's RAND_bytes failed)");
      st.nonces.emplace(*nonce, now);
      return *nonce;
    },
    [self, coordinator](msg::admin_atom a, std::string& command, const std::string& nonce,
                        const std::string& proof) -> caf::result<std::string> {
      auto& st = self->state;
      if (!st.admin) return refuse(self, "this run has no admin token");
      auto it = st.nonces.find(nonce);
      if (it == st.nonces.end() || clock_type::now() - it->second > nonce_life)
        return refuse(self, "its nonce was not handed out by this run, was used already, or is older than a minute");
      st.nonces.erase(it); // good once, whether the proof holds or not
      if (!msg::admin::verify(st.admin->key, nonce, command, proof))
        return refuse(self, "the admin token did not match");
      // Asked, not delegated: the coordinator takes commands from its own
      // process only, so the sender it sees must be this actor. A console
      // sending stop is waited for from now on: the node may begin to exit
      // before the coordinator's answer reaches this actor.
      auto console = self->current_sender(); // before the promise, which takes it
      auto promise = self->make_response_promise<std::string>();
      if (command == "stop" && console) {
        self->monitor(console);
        st.told_to_leave.insert(console->address());
      }
      self->request(coordinator, caf::infinite, a, std::move(command))
        .then([promise](std::string& done) mutable { promise.deliver(std::move(done)); },
              [self, promise, console](caf::error& e) mutable {
                promise.deliver(std::move(e));
                if (console) let_go(self, console->address());
              });
      return promise;
    },
    [self](msg::linger_atom) -> caf::result<bool> {
      auto& st = self->state;
      if (st.told_to_leave.empty()) return true;
      st.lingering.push_back(self->make_response_promise<bool>());
      return st.lingering.back();
    },
  };
}

} // namespace

msg::inspector_actor spawn_inspector(caf::actor_system& sys, const msg::coordinator_actor& coordinator,
                                     std::optional<cluster_token> admin, std::function<void(const std::string&)> log) {
  return sys.spawn(inspector, coordinator, std::move(admin), std::move(log));
}

} // namespace abg::actors
