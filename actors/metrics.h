// `--metrics` (docs/console.md, "Metrics"): the inspector's views as
// Prometheus counters and gauges in a prometheus-cpp registry, which the
// pull exposer serves in Prometheus' text format. Counters only: no entity
// names, no tensors. A total that a view reports lower than before (a node
// restarted) leaves its counter where it was: counters never go down.
#pragma once

#include <string>

#include <nlohmann/json.hpp>
#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>

namespace abg::actors {

class run_metrics {
public:
  explicit run_metrics(prometheus::Registry& registry);

  /// Brings every series to what the views say (documents as the inspector
  /// serves them: "nodes", "trainers", "traffic", "params").
  void update(const nlohmann::json& nodes, const nlohmann::json& trainers, const nlohmann::json& traffic,
              const nlohmann::json& params);

private:
  static void set_total(prometheus::Counter& c, double total);

  prometheus::Family<prometheus::Gauge>& iteration_;
  prometheus::Family<prometheus::Gauge>& iterations_;
  prometheus::Family<prometheus::Gauge>& epoch_;
  prometheus::Family<prometheus::Counter>& trained_edges_;
  prometheus::Family<prometheus::Counter>& trained_buckets_;
  prometheus::Family<prometheus::Gauge>& loss_;
  prometheus::Family<prometheus::Gauge>& training_;
  prometheus::Family<prometheus::Counter>& kernel_seconds_;
  prometheus::Family<prometheus::Counter>& fetch_seconds_;
  prometheus::Family<prometheus::Counter>& lock_wait_seconds_;
  prometheus::Family<prometheus::Counter>& partitions_loaded_;
  prometheus::Family<prometheus::Gauge>& held_out_mrr_;
  prometheus::Family<prometheus::Gauge>& up_;
  prometheus::Family<prometheus::Gauge>& heard_;
  prometheus::Family<prometheus::Gauge>& rss_;
  prometheus::Family<prometheus::Gauge>& partition_bytes_;
  prometheus::Family<prometheus::Gauge>& parameter_bytes_;
  prometheus::Family<prometheus::Counter>& sent_;
  prometheus::Family<prometheus::Counter>& received_;
  prometheus::Family<prometheus::Counter>& sent_messages_;
  prometheus::Family<prometheus::Counter>& received_messages_;
  prometheus::Family<prometheus::Counter>& pair_bytes_;
  prometheus::Family<prometheus::Counter>& pair_messages_;
  prometheus::Family<prometheus::Counter>& role_pair_messages_;
  prometheus::Family<prometheus::Counter>& role_pair_bytes_;
  prometheus::Family<prometheus::Counter>& pushes_;
  prometheus::Family<prometheus::Counter>& pulls_;
  prometheus::Family<prometheus::Gauge>& shard_bytes_;
};

} // namespace abg::actors
