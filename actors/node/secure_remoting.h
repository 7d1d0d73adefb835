// CAF's remoting behind the cluster token (docs/security.md). CAF 0.17's
// BASP has no authentication hook and lets any connected peer message any
// actor of a node, so the token is proven before BASP sees a connection:
// a middleman actor of ours (CAF's own, with its connect and open
// overridden, as caf_openssl does for TLS) runs the client handshake on
// every connection it opens, and its doorman hands every accepted socket to
// the node's gate (actors/node/gate.h) instead of to BASP; BASP gets the
// socket once it passed. Every publish and every connection of a node goes
// through here; CAF's default middleman actor is never used.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include <caf/all.hpp>
#include <caf/io/middleman_actor.hpp>

#include "actors/node/gate.h"

namespace abg::actors {

/// An actor system's configuration with the node's gate: the token and the
/// handshake's limits for every port it opens and every connection it
/// makes, BASP's and the bulk channel's alike.
class secured_system_config : public caf::actor_system_config {
public:
  std::shared_ptr<actors::gate> gate;
};

/// The gate of `sys`; nullptr when it was not configured with one.
actors::gate* gate_of(caf::actor_system& sys);

/// The error of a connection that trying again cannot help: the peer
/// refused this node's token, or the two disagree on TLS (CAF has no code
/// of its own for it; the error's text says which).
inline constexpr caf::sec handshake_refused = caf::sec::incompatible_application_ids;

class secure_remoting {
public:
  /// `sys` must have a gate (secured_system_config) and the middleman.
  explicit secure_remoting(caf::actor_system& sys);
  ~secure_remoting(); // stops the gate, then the middleman actor
  secure_remoting(const secure_remoting&) = delete;
  secure_remoting& operator=(const secure_remoting&) = delete;

  /// CAF's publish, through the gate: returns the port.
  template <class Handle>
  caf::expected<std::uint16_t> publish(const Handle& whom, std::uint16_t port, const std::string& host) {
    return publish_impl(caf::actor_cast<caf::strong_actor_ptr>(whom), sys_.message_types(whom), port, host);
  }

  /// CAF's remote_actor, through the handshake.
  template <class Handle>
  caf::expected<Handle> remote_actor(const std::string& host, std::uint16_t port) {
    caf::detail::type_list<Handle> tk;
    auto ptr = remote_impl(sys_.message_types(tk), host, port);
    if (!ptr) return ptr.error();
    return caf::actor_cast<Handle>(std::move(*ptr));
  }

  /// The middleman actor itself (connect_atom to reach a peer node).
  const caf::io::middleman_actor& actor() const { return mm_; }

private:
  caf::expected<std::uint16_t> publish_impl(caf::strong_actor_ptr whom, std::set<std::string> sigs,
                                            std::uint16_t port, const std::string& host);
  caf::expected<caf::strong_actor_ptr> remote_impl(std::set<std::string> sigs, const std::string& host,
                                                   std::uint16_t port);

  caf::actor_system& sys_;
  caf::io::middleman_actor mm_;
};

} // namespace abg::actors
