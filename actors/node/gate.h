// The gate in front of every port a node opens (docs/security.md): accepted
// connections wait here, on one thread, until they prove the cluster token
// (messages/handshake.h) and, with TLS, finish its handshake (messages/tls.h);
// only then does their socket go on to CAF's BASP or to the bulk channel. A connection has `timeout` from its accept to
// finish; at most `max_pending` wait at once, and a new one beyond that
// closes the one that has waited longest, so idle or trickling strangers
// cannot keep a node's own peers out for longer than one handshake. Each
// refused connection is logged once, with its address and why.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "abg/token.h"
#include "messages/handshake.h"
#include "messages/tls.h"

namespace abg::actors {

class gate {
public:
  struct limits {
    std::chrono::milliseconds timeout{5000};
    std::size_t max_pending = 64;
  };
  using log_fn = std::function<void(const std::string&)>;
  /// Called on the gate's thread with a socket that passed (and its TLS
  /// session, with TLS); it owns the socket.
  using pass_fn = std::function<void(int fd, msg::tls::session tls)>;

  /// `tls`: the node's TLS context, or null for none.
  gate(cluster_token token, limits l, log_fn log, std::shared_ptr<msg::tls::context> tls = nullptr);
  ~gate(); // stop()
  gate(const gate&) = delete;
  gate& operator=(const gate&) = delete;

  /// Takes an accepted socket: passes it on once its handshake succeeds,
  /// closes it otherwise.
  void admit(int fd, pass_fn pass);

  /// Stops the gate's thread and closes the connections still waiting;
  /// nothing is passed on afterwards. Before the receivers of pass go away.
  void stop();

  const cluster_token& token() const { return token_; }
  msg::tls::context* tls() const { return tls_.get(); }
  const limits& bounds() const { return limits_; }
  /// Connections refused so far (for tests and the node's summary).
  std::uint64_t refused() const { return refused_.load(); }

private:
  struct waiting;
  void loop(std::stop_token stop);
  void close_refused(waiting& w, const std::string& why);

  cluster_token token_;
  limits limits_;
  log_fn log_;
  std::shared_ptr<msg::tls::context> tls_;
  int wake_ = -1; // eventfd
  std::mutex mutex_;
  std::vector<std::unique_ptr<waiting>> arrived_; // guarded by mutex_
  bool stopped_ = false;                          // guarded by mutex_
  std::list<std::unique_ptr<waiting>> waiting_;   // the gate thread's
  std::atomic<std::uint64_t> refused_{0};
  std::jthread thread_; // last: stopped and joined first
};

} // namespace abg::actors
