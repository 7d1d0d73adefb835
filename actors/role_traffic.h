// CAF's messages between processes by the roles of the two actors they
// pass between (the traffic view's role pairs, docs/console.md): BASP's
// header names the source and destination actor ids, and each process knows
// the roles of its own actors. A message is counted once, on the side that
// can name both ends: the sender when the destination is a long-lived role
// actor of its node (which every node learns from the coordinator), else
// the receiver, whose destination is then a helper (a short-lived actor
// that makes blocking requests for a role, actors/blocking_peer.h), and
// whose source is long-lived. The coordinator turns the other end's actor
// id into a role with that node's list (traffic_view.h).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace abg::actors::role_traffic {

/// BASP's own messages (handshakes, heartbeats, monitoring), counted by the sender.
inline constexpr std::string_view caf_role = "caf";
/// Anonymous sends (actor id 0): a node's own plumbing (log lines, failure notices).
inline constexpr std::string_view node_role = "node";
/// An actor no role named.
inline constexpr std::string_view other_role = "other";
/// A flow's remote end when the receiver cannot name the sender.
inline constexpr std::uint64_t unknown_actor = ~std::uint64_t{0};
/// caf::io::basp::message_type's messages between two actors (checked in actors/node/basp_counter.cpp).
inline constexpr std::uint8_t direct_message = 2, routed_message = 3;

/// Names one of this process's actors by its CAF actor id: a role's own
/// (long-lived) actor, or a `helper` of that role.
void name_actor(std::uint64_t id, std::string role, bool helper = false);
void forget_actor(std::uint64_t id);

/// The role whose work this thread does: helpers made on it are named so.
void set_thread_role(std::string role);
const std::string& thread_role();

/// Names a helper actor with this thread's role for the guard's lifetime.
class helper_name {
public:
  explicit helper_name(std::uint64_t id) : id_(id) { name_actor(id, thread_role(), true); }
  ~helper_name() { forget_actor(id_); }
  helper_name(const helper_name&) = delete;
  helper_name& operator=(const helper_name&) = delete;

private:
  std::uint64_t id_;
};

/// The long-lived actors' ids of every node (as the coordinator sends them):
/// a destination outside them is a helper, whose node counts the message.
/// Empty: not known yet, so the sender counts every message (a list that
/// lacked a node's actors would leave messages to them counted by neither end).
void set_long_lived(std::vector<std::uint64_t> ids);

/// One of CAF's connections, its own end "ip:port": the coordinator finds a
/// node's accepted connection by the address its opener reports.
void connection_opened(std::string local);

/// One BASP message on the connection with `peer` ("ip:port"); `outgoing`: this process wrote it.
void count(const std::string& peer, bool outgoing, std::uint8_t operation, std::uint64_t source, std::uint64_t dest,
           std::uint64_t bytes);

/// Messages and bytes between an actor of this process with `role` and
/// actor `remote` of the process at `peer` (0: an anonymous sender, or
/// BASP's own with role caf; unknown_actor: one the receiver cannot name).
struct flow {
  std::string peer;
  bool outgoing = false;
  std::string role;
  std::uint64_t remote = 0;
  std::uint64_t messages = 0, bytes = 0;
};

struct actor {
  std::uint64_t id = 0;
  std::string role;
};

struct report {
  std::vector<flow> flows;
  std::vector<actor> long_lived;      // this process's role actors
  std::vector<std::string> local_ends; // of CAF's connections
};

report measure();

} // namespace abg::actors::role_traffic
