// A partition server's bulk channel (docs/actors.md, "Bulk transfer"): a TCP
// listener beside the partition server actor of a node of a multi-process
// cluster. Each connection carries one get or put of a whole partition; the
// listener's threads hand the partition to and from the actor through local
// messages (in one process a tensor is shared, not copied), so the actor
// stays the only owner of the partitions and their versions. Accepted
// connections pass the node's gate (the cluster token) before they are served.
#pragma once

#include <atomic>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include <caf/all.hpp>

#include "abg/error.h"
#include "actors/deadlines.h"
#include "actors/partition_shapes.h"
#include "messages/interfaces.h"
#include "messages/tls.h"

namespace abg::actors {

class gate;

class partition_bulk_server {
public:
  /// Listens on `host` (port chosen by the kernel); `sys` must have a gate
  /// (actors/node/secure_remoting.h). Puts must fit `shapes` (null: any).
  /// With `streamed_puts` (a server that stores on disk) a put reaches the
  /// server a block of rows at a time; otherwise whole, in one message that
  /// the server keeps without a copy.
  static expected<std::unique_ptr<partition_bulk_server>> start(caf::actor_system& sys,
                                                                msg::partition_server_actor server,
                                                                const std::string& host, deadlines limits,
                                                                std::shared_ptr<const partition_shapes> shapes = nullptr,
                                                                bool streamed_puts = false);
  ~partition_bulk_server(); // stops listening, finishes the connections, joins
  std::uint16_t port() const { return port_; }
  /// The most rows of one put held in this process's memory at once.
  std::uint64_t put_rows_held_most() const { return held_most_; }
  /// Connections being served now.
  std::size_t connections() const { return active_; }

  /// Connections served at once; more wait in the listen queue.
  static constexpr std::size_t max_connections = 32;

private:
  partition_bulk_server(caf::actor_system& sys, msg::partition_server_actor server, deadlines limits)
      : sys_(sys), server_(std::move(server)), limits_(limits) {}
  void accept_loop(std::stop_token stop);
  void start_serving(int fd, msg::tls::session tls); // under intake_->mutex
  void serve(int fd, msg::tls::session tls);

  // What the gate's thread reaches a passed connection through: cleared by
  // the destructor, so that a late pass closes its socket instead.
  struct intake {
    std::mutex mutex;
    partition_bulk_server* server = nullptr;
  };

  caf::actor_system& sys_;
  msg::partition_server_actor server_;
  deadlines limits_;
  std::shared_ptr<const partition_shapes> shapes_;
  bool streamed_puts_ = false;
  std::atomic<std::uint64_t> held_most_{0};
  gate* gate_ = nullptr;
  std::shared_ptr<intake> intake_ = std::make_shared<intake>();
  int listener_ = -1;
  std::uint16_t port_ = 0;
  std::atomic<bool> stopping_{false};
  std::mutex mutex_;
  struct connection {
    std::shared_ptr<std::atomic<bool>> done;
    std::jthread thread;
  };
  std::list<connection> connections_; // guarded by mutex_
  std::atomic<std::size_t> active_{0};
  std::jthread acceptor_; // last: stopped and joined first
};

} // namespace abg::actors
