#include "actors/param_sharer.h"

#include <algorithm>

#include <fmt/format.h>

#include "abg/cluster.h"

#include "actors/blocking_peer.h"
#include "actors/role_traffic.h"
#include "actors/traffic.h"

namespace abg::actors {
namespace {

// FNV-1a: the same shard for a name on every machine.
std::size_t shard_of(const std::string& name, std::size_t shards) {
  std::uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : name)
    h = (h ^ c) * 1099511628211ULL;
  return static_cast<std::size_t>(h % shards);
}

// Slice k of a tensor of n values is "{name}#{k}": values [k * slice_floats, ...).
template <class F>
void for_each_slice(const std::string& name, std::int64_t n, F f) {
  std::int64_t k = 0;
  for (std::int64_t first = 0; first < n; first += param_sharer::slice_floats, ++k)
    f(fmt::format("{}#{}", name, k), first, std::min(param_sharer::slice_floats, n - first));
}

msg::tensor to_message(const float* data, std::int64_t n) {
  return msg::tensor::make({n}, std::vector<float>(data, data + n));
}

} // namespace

std::string shared_table_name(const std::string& entity_type) { return "table." + entity_type; }
std::string shared_table_state_name(const std::string& entity_type) { return "table_state." + entity_type; }

std::vector<std::pair<std::string, torch::Tensor>> param_sharer::shared_tensors(const model::shared_params& params) {
  std::vector<std::pair<std::string, torch::Tensor>> out;
  for (const auto& [name, t] : params.values)
    if (!params.views.contains(name))
      out.emplace_back("param." + name, t);
  for (const auto& [key, t] : params.stacks)
    out.emplace_back("stack." + key, t);
  return out;
}

param_sharer::param_sharer(caf::actor_system& sys, std::vector<msg::parameter_server_actor> shards,
                           caf::timespan deadline, const std::atomic<bool>* stop)
    : sys_(sys), deadline_(deadline), stop_(stop), shards_(std::move(shards)) {}

param_sharer::~param_sharer() {
  loop_.request_stop();
  if (loop_.joinable())
    loop_.join();
}

void param_sharer::add(const std::string& name, torch::Tensor local) {
  std::lock_guard lock(mutex_);
  auto flat = local.view({-1});
  for_each_slice(name, flat.numel(), [&](std::string slice_name, std::int64_t first, std::int64_t count) {
    auto view = flat.narrow(0, first, count);
    slice s;
    s.shard = shard_of(slice_name, shards_.size());
    s.name = std::move(slice_name);
    s.synced.assign(view.data_ptr<float>(), view.data_ptr<float>() + view.numel());
    s.local = std::move(view);
    slices_.push_back(std::move(s));
  });
}

expected<void> param_sharer::initialise(caf::actor_system& sys,
                                        const std::vector<msg::parameter_server_actor>& shards,
                                        const std::string& name, const float* data, std::int64_t n,
                                        caf::timespan deadline) {
  std::vector<std::optional<blocking_peer<msg::parameter_server_actor>>> peers(shards.size());
  std::optional<error> failure;
  for_each_slice(name, n, [&](std::string slice_name, std::int64_t first, std::int64_t count) {
    if (failure)
      return;
    auto& peer = peers[shard_of(slice_name, shards.size())];
    if (!peer) peer.emplace(sys, shards[shard_of(slice_name, shards.size())], deadline);
    auto set = peer->ask<msg::tensor>(fmt::format("parameter server: cannot set {}", slice_name), msg::push_atom::value,
                                      slice_name, to_message(data + first, count));
    if (!set)
      failure = set.error();
    else if (shards[shard_of(slice_name, shards.size())].node() != sys.node())
      traffic::count(traffic::kind::parameters, static_cast<std::uint64_t>(count) * sizeof(float),
                     static_cast<std::uint64_t>(count) * sizeof(float), 1, 1);
  });
  if (failure)
    return std::unexpected(*failure);
  return {};
}

expected<void> param_sharer::round() {
  // One peer per shard: a shard that goes down fails the round at once.
  std::vector<std::optional<blocking_peer<msg::parameter_server_actor>>> peers(shards_.size());
  for (auto& s : slices_) {
    float* local = s.local.data_ptr<float>();
    const auto n = s.local.numel();
    // What the local workers changed since the last exchange (a snapshot: they go on meanwhile).
    auto& snapshot = snapshot_;
    snapshot.assign(local, local + n);
    std::vector<float> delta(static_cast<std::size_t>(n)); // moved into the message
    for (std::int64_t i = 0; i < n; ++i)
      delta[static_cast<std::size_t>(i)] = snapshot[static_cast<std::size_t>(i)] - s.synced[static_cast<std::size_t>(i)];
    auto& peer = peers[s.shard];
    if (!peer) peer.emplace(sys_, shards_[s.shard], deadline_, stop_);
    auto sum = peer->ask<msg::tensor>(fmt::format("parameter server: cannot push {}", s.name), msg::push_atom::value,
                                      s.name, msg::tensor::make({n}, std::move(delta)));
    if (!sum)
      return std::unexpected(sum.error());
    if (sum->numel() != static_cast<std::size_t>(n))
      return fail("parameter server: {} came back with {} values, expected {}", s.name, sum->numel(), n);
    if (shards_[s.shard].node() != sys_.node())
      traffic::count(traffic::kind::parameters, static_cast<std::uint64_t>(n) * sizeof(float),
                     static_cast<std::uint64_t>(n) * sizeof(float), 1, 1);
    // Every machine's changes, plus what ours did since the snapshot (HOGWILD: a concurrent update of
    // the same value between the read and the write below is lost, as in PBG).
    const auto v = sum->values();
    for (std::int64_t i = 0; i < n; ++i)
      local[i] += v[static_cast<std::size_t>(i)] - snapshot[static_cast<std::size_t>(i)];
    s.synced.assign(v.begin(), v.end());
  }
  ++rounds_;
  return {};
}

expected<void> param_sharer::sync() {
  std::lock_guard lock(mutex_);
  if (failure_)
    return std::unexpected(*failure_);
  auto r = round();
  if (!r)
    failure_ = r.error();
  return r;
}

void param_sharer::start(std::chrono::milliseconds period) {
  loop_ = std::jthread([this, period](std::stop_token stop) {
    role_traffic::set_thread_role(std::string(to_string(role::trainer))); // a trainer's exchanges
    while (!stop.stop_requested()) {
      {
        std::lock_guard lock(mutex_);
        if (failure_)
          return;
        if (auto r = round(); !r) {
          failure_ = r.error();
          return;
        }
      }
      const auto until = std::chrono::steady_clock::now() + period;
      while (!stop.stop_requested() && std::chrono::steady_clock::now() < until)
        std::this_thread::sleep_for(std::min(period, std::chrono::milliseconds(5)));
    }
  });
}

std::optional<error> param_sharer::failure() const {
  std::lock_guard lock(mutex_);
  return failure_;
}

std::uint64_t param_sharer::rounds() const {
  std::lock_guard lock(mutex_);
  return rounds_;
}

} // namespace abg::actors
