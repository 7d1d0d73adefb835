// Requests from a role's job thread (never from an actor's handler): sent as
// plain messages, so several can be in flight, and answered in the order
// sent (CAF keeps the order between two actors). Waiting for an answer fails
// as soon as the peer goes down (it is monitored), when the deadline passes,
// or when the stop flag is set: a job never hangs on a lost node.
#pragma once

#include <atomic>
#include <chrono>
#include <optional>
#include <string>
#include <utility>

#include <caf/all.hpp>
#include <fmt/format.h>

#include "abg/error.h"
#include "actors/role_traffic.h"

namespace abg::actors {

template <class Handle>
class blocking_peer {
public:
  blocking_peer(caf::actor_system& sys, Handle peer, caf::timespan deadline, const std::atomic<bool>* stop = nullptr)
      : sys_(sys), self_(sys), named_(self_->id()), peer_(std::move(peer)), deadline_(deadline), stop_(stop) {
    self_->monitor(peer_);
  }

  template <class... Ts>
  void send(Ts&&... xs) {
    self_->send(peer_, std::forward<Ts>(xs)...);
  }

  /// The next answer, which must be a T; `what` names the request in errors.
  template <class T>
  expected<T> next(const std::string& what) {
    std::optional<expected<T>> out;
    const auto until = std::chrono::steady_clock::now() + deadline_;
    while (!out) {
      const auto left = until - std::chrono::steady_clock::now();
      if (left <= std::chrono::steady_clock::duration::zero()) {
        out = lost(fmt::format("{}: no answer within {} s", what,
                               std::chrono::duration_cast<std::chrono::seconds>(deadline_).count()));
        break;
      }
      self_->receive(
        [&](T& v) { out = std::move(v); },
        [&](caf::error& e) { out = fail("{}: {}", what, sys_.render(e)); },
        [&](caf::down_msg& d) {
          if (d.source == peer_.address()) out = lost(fmt::format("{}: the peer is gone ({})", what, sys_.render(d.reason)));
        },
        caf::after(std::min<caf::timespan>(std::chrono::duration_cast<caf::timespan>(left), std::chrono::milliseconds(50))) >>
          [&] {
            if (stop_ && stop_->load()) out = lost(what + ": stopped");
          });
    }
    return std::move(*out);
  }

  /// send, then next.
  template <class T, class... Ts>
  expected<T> ask(const std::string& what, Ts&&... xs) {
    send(std::forward<Ts>(xs)...);
    return next<T>(what);
  }

private:
  static std::unexpected<error> lost(std::string why) { return std::unexpected(error{std::move(why), true}); }

  caf::actor_system& sys_;
  caf::scoped_actor self_;
  role_traffic::helper_name named_; // its messages counted as its thread's role's
  Handle peer_;
  caf::timespan deadline_;
  const std::atomic<bool>* stop_;
};

} // namespace abg::actors
