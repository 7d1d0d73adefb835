// How long a role waits for another. Every request between roles has one of
// these deadlines (a peer that hangs without dying must not block the run);
// a lost peer is noticed sooner, through CAF's heartbeats and monitors.
#pragma once

#include <chrono>

#include <caf/all.hpp>

namespace abg::actors {

struct deadlines {
  /// Any request and its reply (one partition chunk, one parameter slice, a lock).
  caf::timespan request = std::chrono::seconds(60);
  /// The lock server answers an acquire it cannot serve with `wait` after this.
  caf::timespan park = std::chrono::seconds(2);
  /// Nodes wait this long for the whole cluster to join.
  caf::timespan join = std::chrono::seconds(120);
  /// A node silent this long is lost (CAF's connection timeout).
  caf::timespan heartbeat = std::chrono::seconds(5);
  /// A lost partition or parameter server may come back within this; then
  /// the cluster rolls back to the last commit, past it every node exits.
  caf::timespan server_wait = std::chrono::seconds(60);
};

} // namespace abg::actors
