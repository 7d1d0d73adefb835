#include "actors/role_traffic.h"

#include <map>
#include <mutex>
#include <set>
#include <tuple>
#include <unordered_map>
#include <unordered_set>

namespace abg::actors::role_traffic {

namespace {

struct named {
  std::string role;
  bool helper = false;
};

struct counts {
  std::uint64_t messages = 0, bytes = 0;
};

using flow_key = std::tuple<std::string, bool, std::string, std::uint64_t>; // peer, outgoing, role, remote

struct state {
  std::mutex mutex;
  std::unordered_map<std::uint64_t, named> actors;      // guarded by mutex
  std::unordered_set<std::uint64_t> long_lived;         // every node's; guarded by mutex
  bool long_lived_known = false;                        // guarded by mutex
  std::map<flow_key, counts> flows;                     // guarded by mutex
  std::set<std::string> local_ends;                     // guarded by mutex
};

state& the() {
  static state s;
  return s;
}

thread_local std::string this_thread_role{other_role};

} // namespace

void name_actor(std::uint64_t id, std::string role, bool helper) {
  std::lock_guard lock(the().mutex);
  the().actors[id] = {std::move(role), helper};
}

void forget_actor(std::uint64_t id) {
  std::lock_guard lock(the().mutex);
  the().actors.erase(id);
}

void set_thread_role(std::string role) { this_thread_role = std::move(role); }

const std::string& thread_role() { return this_thread_role; }

void set_long_lived(std::vector<std::uint64_t> ids) {
  std::lock_guard lock(the().mutex);
  the().long_lived = {ids.begin(), ids.end()};
  the().long_lived_known = true;
}

void connection_opened(std::string local) {
  std::lock_guard lock(the().mutex);
  the().local_ends.insert(std::move(local));
}

void count(const std::string& peer, bool outgoing, std::uint8_t operation, std::uint64_t source, std::uint64_t dest,
           std::uint64_t bytes) {
  auto& s = the();
  std::lock_guard lock(s.mutex);
  auto add = [&](std::string role, std::uint64_t remote) {
    auto& c = s.flows[{peer, outgoing, std::move(role), remote}];
    c.messages += 1;
    c.bytes += bytes;
  };
  if (operation != direct_message && operation != routed_message) {
    if (outgoing) add(std::string(caf_role), 0);
    return;
  }
  const auto local = outgoing ? source : dest;
  auto remote = outgoing ? dest : source;
  const auto it = s.actors.find(local);
  const bool helper = it == s.actors.end() || it->second.helper;
  std::string role = it != s.actors.end() ? it->second.role : std::string(local == 0 ? node_role : other_role);
  // A message whose destination is long-lived is the sender's to count.
  if (!outgoing && !helper) return;
  if (s.long_lived_known && remote != 0 && !s.long_lived.contains(remote)) {
    if (outgoing) return; // to a helper: its node counts it
    remote = unknown_actor; // from an actor no node named
  }
  add(std::move(role), remote);
}

report measure() {
  auto& s = the();
  report r;
  std::lock_guard lock(s.mutex);
  for (const auto& [k, c] : s.flows)
    r.flows.push_back({std::get<0>(k), std::get<1>(k), std::get<2>(k), std::get<3>(k), c.messages, c.bytes});
  for (const auto& [id, n] : s.actors)
    if (!n.helper) r.long_lived.push_back({id, n.role});
  r.local_ends.assign(s.local_ends.begin(), s.local_ends.end());
  return r;
}

} // namespace abg::actors::role_traffic
