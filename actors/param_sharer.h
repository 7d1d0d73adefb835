// PBG's parameter sharing between trainer machines (parameter_sharing.py):
// every machine trains on its own copy of the shared parameters (relation
// operators, global embeddings) and of the unpartitioned entity tables; a
// background loop pushes what changed locally since the last exchange to the
// parameter-server shards, which add the deltas of all machines up, and takes
// their sums back, keeping what the local workers changed meanwhile. Large
// tensors travel as slices of at most slice_floats values, each slice on the
// shard a hash of its name picks, so every machine agrees without talking.
// Optimizer state stays local, as in PBG.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <caf/all.hpp>
#include <torch/types.h>

#include "abg/error.h"
#include "abg/model/model.h"
#include "messages/interfaces.h"

namespace abg::actors {

/// The name under which an unpartitioned table's embeddings are shared
/// through the parameter servers, and under which a trainer hands the table
/// to the checkpoint; its row-wise Adagrad state (never shared) goes with
/// the second name.
std::string shared_table_name(const std::string& entity_type);
std::string shared_table_state_name(const std::string& entity_type);

class param_sharer {
public:
  static constexpr std::int64_t slice_floats = 1 << 21; // 8 MiB per message

  /// Every request waits at most `deadline`, and gives up when a shard goes
  /// down or `*stop` is set.
  param_sharer(caf::actor_system& sys, std::vector<msg::parameter_server_actor> shards, caf::timespan deadline,
               const std::atomic<bool>* stop = nullptr);
  ~param_sharer(); // stops the loop
  param_sharer(const param_sharer&) = delete;
  param_sharer& operator=(const param_sharer&) = delete;

  /// Shares `local` (float, contiguous; must outlive the sharer) under
  /// `name`. Its current value is taken as what the servers held at the
  /// last exchange: a copy of the initial value, or anything older (the
  /// first exchange then brings it up to date, nothing is pushed twice).
  void add(const std::string& name, torch::Tensor local);
  /// Exchanges every `period` on a background thread until destruction.
  void start(std::chrono::milliseconds period);
  /// One exchange of every shared tensor now (serialised with the loop).
  expected<void> sync();
  /// The first error of the background loop (it stops there).
  std::optional<error> failure() const;
  /// Exchange rounds done so far (background and sync()).
  std::uint64_t rounds() const;

  /// The tensors a machine shares: every shared parameter's storage (the
  /// stacks of relation parameters, not their row views), by names all
  /// machines agree on.
  static std::vector<std::pair<std::string, torch::Tensor>> shared_tensors(const model::shared_params& params);

  /// Sets the servers' value of `name` (the first push of a name sets it):
  /// once per run, before any machine exchanges it.
  static expected<void> initialise(caf::actor_system& sys, const std::vector<msg::parameter_server_actor>& shards,
                                   const std::string& name, const float* data, std::int64_t n, caf::timespan deadline);

private:
  struct slice {
    std::string name; // "{tensor name}#{k}"
    std::size_t shard = 0;
    torch::Tensor local; // a view of the shared tensor, flat
    std::vector<float> synced;
  };
  expected<void> round();

  caf::actor_system& sys_;
  caf::timespan deadline_;
  const std::atomic<bool>* stop_;
  std::vector<msg::parameter_server_actor> shards_;
  std::vector<slice> slices_;
  std::vector<float> snapshot_; // round(): one slice's local values, reused (guarded by mutex_)
  mutable std::mutex mutex_; // one round at a time; guards failure_ and rounds_
  std::optional<error> failure_;
  std::uint64_t rounds_ = 0;
  std::jthread loop_;
};

} // namespace abg::actors
