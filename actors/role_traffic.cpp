#include "actors/role_traffic.h"

#include <map>
#include <mutex>
#include <set>
#include <tuple>
#include <unordered_map>
#include <unordered_set>

namespace abg::actors::role_traffic {

namespace {

// Roles are interned: a BASP message is counted without building a string.
using role_id = std::uint32_t;

struct named {
  role_id role = 0;
  bool helper = false;
};

struct counts {
  std::uint64_t messages = 0, bytes = 0;
};

using flow_key = std::tuple<bool, role_id, std::uint64_t>; // outgoing, role, remote

struct state {
  std::mutex mutex;
  std::vector<std::string> roles{std::string(caf_role), std::string(node_role), std::string(other_role)};  // by id
  std::unordered_map<std::string, role_id> role_ids{{roles[0], 0}, {roles[1], 1}, {roles[2], 2}};
  std::unordered_map<std::uint64_t, named> actors;      // guarded by mutex
  std::unordered_set<std::uint64_t> long_lived;         // every node's; guarded by mutex
  bool long_lived_known = false;                        // guarded by mutex
  std::map<std::string, std::map<flow_key, counts>, std::less<>> flows;  // by peer; guarded by mutex
  std::set<std::string> local_ends;                     // guarded by mutex

  role_id intern(std::string role) {  // with mutex held
    auto [it, added] = role_ids.try_emplace(std::move(role), static_cast<role_id>(roles.size()));
    if (added) roles.push_back(it->first);
    return it->second;
  }
};
constexpr role_id caf_id = 0, node_id = 1, other_id = 2;

state& the() {
  static state s;
  return s;
}

thread_local std::string this_thread_role{other_role};

} // namespace

void name_actor(std::uint64_t id, std::string role, bool helper) {
  auto& s = the();
  std::lock_guard lock(s.mutex);
  s.actors[id] = {s.intern(std::move(role)), helper};
}

void forget_actor(std::uint64_t id) {
  std::lock_guard lock(the().mutex);
  the().actors.erase(id);
}

void set_thread_role(std::string role) { this_thread_role = std::move(role); }

const std::string& thread_role() { return this_thread_role; }

void set_long_lived(std::vector<std::uint64_t> ids) {
  std::lock_guard lock(the().mutex);
  // None yet (no node has reported its actors): every destination stays kept by id.
  the().long_lived_known = !ids.empty();
  the().long_lived = {ids.begin(), ids.end()};
}

void connection_opened(std::string local) {
  std::lock_guard lock(the().mutex);
  the().local_ends.insert(std::move(local));
}

void count(const std::string& peer, bool outgoing, std::uint8_t operation, std::uint64_t source, std::uint64_t dest,
           std::uint64_t bytes) {
  auto& s = the();
  std::lock_guard lock(s.mutex);
  auto add = [&](role_id role, std::uint64_t remote) {
    auto at = s.flows.find(peer);
    if (at == s.flows.end()) at = s.flows.emplace(peer, std::map<flow_key, counts>{}).first;
    auto& c = at->second[{outgoing, role, remote}];
    c.messages += 1;
    c.bytes += bytes;
  };
  if (operation != direct_message && operation != routed_message) {
    if (outgoing) add(caf_id, 0);
    return;
  }
  const auto local = outgoing ? source : dest;
  auto remote = outgoing ? dest : source;
  const auto it = s.actors.find(local);
  const bool helper = it == s.actors.end() || it->second.helper;
  const role_id role = it != s.actors.end() ? it->second.role : local == 0 ? node_id : other_id;
  // A message whose destination is long-lived is the sender's to count.
  if (!outgoing && !helper) return;
  if (s.long_lived_known && remote != 0 && !s.long_lived.contains(remote)) {
    if (outgoing) return; // to a helper: its node counts it
    remote = unknown_actor; // from an actor no node named
  }
  add(role, remote);
}

report measure() {
  auto& s = the();
  report r;
  std::lock_guard lock(s.mutex);
  for (const auto& [peer, of_peer] : s.flows)
    for (const auto& [k, c] : of_peer)
      r.flows.push_back({peer, std::get<0>(k), s.roles[std::get<1>(k)], std::get<2>(k), c.messages, c.bytes});
  for (const auto& [id, n] : s.actors)
    if (!n.helper) r.long_lived.push_back({id, s.roles[n.role]});
  r.local_ends.assign(s.local_ends.begin(), s.local_ends.end());
  return r;
}

} // namespace abg::actors::role_traffic
