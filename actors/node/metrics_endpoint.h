// `--metrics ADDRESS:PORT` on the coordinator's node (docs/console.md,
// "Metrics"): prometheus-cpp's pull exposer serving the run's registry, and
// a thread that brings the registry up to the coordinator's views every
// second (actors/metrics.h). Only counters and gauges leave the process.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include <caf/all.hpp>

#include "abg/error.h"
#include "messages/interfaces.h"

namespace prometheus {
class Exposer;
class Registry;
} // namespace prometheus

namespace abg::actors {

class run_metrics;

class metrics_endpoint {
public:
  /// Listens on host:port or says why it cannot.
  static expected<std::unique_ptr<metrics_endpoint>> start(caf::actor_system& sys, msg::coordinator_actor coordinator,
                                                           const std::string& host, std::uint16_t port);
  ~metrics_endpoint();
  metrics_endpoint(const metrics_endpoint&) = delete;
  metrics_endpoint& operator=(const metrics_endpoint&) = delete;

  std::uint16_t port() const { return port_; }

private:
  metrics_endpoint() = default;
  void refresh_loop(std::stop_token stop);

  caf::actor_system* sys_ = nullptr;
  msg::coordinator_actor coordinator_;
  std::shared_ptr<prometheus::Registry> registry_;
  std::unique_ptr<run_metrics> metrics_;
  std::unique_ptr<prometheus::Exposer> exposer_;
  std::uint16_t port_ = 0;
  std::mutex mutex_;
  std::condition_variable_any wake_;
  std::jthread refresher_; // last: stops and joins first
};

} // namespace abg::actors
