#include "actors/node/metrics_endpoint.h"

#include <chrono>
#include <exception>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <prometheus/exposer.h>
#include <prometheus/registry.h>

#include "actors/metrics.h"

namespace abg::actors {

expected<std::unique_ptr<metrics_endpoint>> metrics_endpoint::start(caf::actor_system& sys,
                                                                     msg::coordinator_actor coordinator,
                                                                     const std::string& host, std::uint16_t port) {
  std::unique_ptr<metrics_endpoint> out(new metrics_endpoint);
  out->sys_ = &sys;
  out->coordinator_ = std::move(coordinator);
  out->registry_ = std::make_shared<prometheus::Registry>();
  out->metrics_ = std::make_unique<run_metrics>(*out->registry_);
  try {
    out->exposer_ = std::make_unique<prometheus::Exposer>(fmt::format("{}:{}", host, port), 1);
  } catch (const std::exception& e) {
    return fail("the metrics endpoint cannot listen on {}:{}: {} (--metrics ADDRESS:PORT)", host, port, e.what());
  }
  const auto ports = out->exposer_->GetListeningPorts();
  if (ports.empty()) return fail("the metrics endpoint cannot listen on {}:{} (--metrics ADDRESS:PORT)", host, port);
  out->port_ = static_cast<std::uint16_t>(ports.front());
  out->exposer_->RegisterCollectable(out->registry_);
  auto* self = out.get();
  out->refresher_ = std::jthread([self](std::stop_token stop) { self->refresh_loop(stop); });
  return out;
}

// The refresher's wait ends at its stop request.
metrics_endpoint::~metrics_endpoint() = default;

void metrics_endpoint::refresh_loop(std::stop_token stop) {
  caf::scoped_actor self{*sys_};
  auto ask = [&](const char* view) {
    nlohmann::json doc = nlohmann::json::object();
    self->request(coordinator_, std::chrono::seconds(2), msg::inspect_atom::value, std::string(view))
      .receive([&](std::string& text) { doc = nlohmann::json::parse(text, nullptr, false); },
               [](caf::error&) {});
    return doc.is_discarded() ? nlohmann::json::object() : doc;
  };
  while (!stop.stop_requested()) {
    auto nodes = ask("nodes");
    auto trainers = ask("trainers");
    auto traffic = ask("traffic");
    auto params = ask("params");
    metrics_->update(nodes, trainers, traffic, params);
    std::unique_lock lock(mutex_);
    wake_.wait_for(lock, stop, std::chrono::seconds(1), [] { return false; });
  }
}

} // namespace abg::actors
