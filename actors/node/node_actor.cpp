#include "actors/node/node_actor.h"

#include <charconv>
#include <memory>

#include <caf/io/all.hpp>

#include "abg/storage/host_memory.h"
#include "actors/node/secure_remoting.h"
#include "actors/role_traffic.h"
#include "actors/traffic.h"
#include "messages/bulk_wire.h"

namespace abg::actors {
namespace {

struct node_state {
  node_state() = default;  // not an aggregate: CAF would construct it from the actor pointer
  static inline const char* name = "abg.node";
};

msg::node_actor::behavior_type node(msg::node_actor::stateful_pointer<node_state> self, caf::actor main,
                                    caf::timespan deadline, caf::io::middleman_actor mm) {
  return {
      [self, deadline, mm](msg::peers_atom, const std::vector<std::string>& peers) -> caf::result<bool> {
        auto promise = self->make_response_promise<bool>();
        auto pending = std::make_shared<std::size_t>(peers.size());
        auto first_error = std::make_shared<caf::error>();  // answered once all were tried
        if (peers.empty()) return true;
        auto one_done = [promise, pending, first_error]() mutable {
          if (--*pending != 0) return;
          if (*first_error)
            promise.deliver(*first_error);
          else
            promise.deliver(true);
        };
        for (const auto& address : peers) {
          auto colon = address.rfind(':');
          uint16_t port = 0;
          if (colon == std::string::npos ||
              std::from_chars(address.data() + colon + 1, address.data() + address.size(), port).ec != std::errc{}) {
            if (!*first_error)
              *first_error = caf::make_error(caf::sec::invalid_argument, "not a host:port address: " + address);
            one_done();
            continue;
          }
          auto host = address.substr(0, colon);
          // Connecting is enough: from then on BASP routes to that node directly.
          self->request(mm, deadline, caf::connect_atom::value, host, port)
            .then([one_done](const caf::node_id&, caf::strong_actor_ptr&, std::set<std::string>&) mutable { one_done(); },
                  [one_done, first_error, address](caf::error& e) mutable {
                    if (!*first_error)
                      *first_error = caf::make_error(caf::sec::runtime_error,
                                                     "cannot reach " + address + ": " + caf::to_string(e));
                    one_done();
                  });
        }
        return promise;
      },
      [self, deadline](msg::probe_atom, const std::vector<std::string>& endpoints) -> caf::result<bool> {
        // Blocking, but only in a check, where this actor has nothing else to do.
        const auto idle = std::min(std::chrono::duration_cast<std::chrono::milliseconds>(deadline),
                                   std::chrono::milliseconds(5000));
        auto* g = gate_of(self->system());
        if (!g) return caf::make_error(caf::sec::runtime_error, "this node has no cluster token");
        for (const auto& e : endpoints)
          if (auto c = msg::bulk::channel::connect(e, g->token().key, idle, nullptr, g->tls()); !c)
            return caf::make_error(caf::sec::runtime_error, "cannot reach the bulk channel " + e + ": " + c.error().message);
        return true;
      },
      [self, main](msg::finish_atom, int32_t code, const std::string& why) {
        caf::anon_send(main, msg::finish_atom::value, code, why);
        return true;
      },
      [](msg::status_atom, std::vector<uint64_t>& long_lived) {
        role_traffic::set_long_lived(std::move(long_lived));
        msg::node_status s;
        s.rss_bytes = storage::resident_memory();
        const auto t = traffic::measure();
        s.sent.assign(t.sent.begin(), t.sent.end());
        s.received.assign(t.received.begin(), t.received.end());
        s.implied_swaps = t.implied_swaps;
        s.messages_sent.assign(t.messages_sent.begin(), t.messages_sent.end());
        s.messages_received.assign(t.messages_received.begin(), t.messages_received.end());
        for (const auto& p : t.peers) {
          s.peers.push_back(p.peer);
          s.peer_sent.push_back(p.sent);
          s.peer_received.push_back(p.received);
          s.peer_messages_sent.push_back(p.messages_sent);
          s.peer_messages_received.push_back(p.messages_received);
        }
        auto roles = role_traffic::measure();
        for (auto& f : roles.flows)
          s.flows.push_back({std::move(f.peer), f.outgoing, std::move(f.role), f.remote, f.messages, f.bytes});
        for (auto& a : roles.long_lived) s.actors.push_back({a.id, std::move(a.role)});
        s.local_ends = std::move(roles.local_ends);
        return s;
      },
  };
}

}  // namespace

msg::node_actor spawn_node_actor(caf::actor_system& sys, caf::actor main, caf::timespan deadline,
                                 caf::io::middleman_actor mm) {
  auto h = sys.spawn(node, std::move(main), deadline, std::move(mm));
  role_traffic::name_actor(h.id(), std::string(role_traffic::node_role));
  return h;
}

}  // namespace abg::actors
