#include "runtime/schedule/bucket_scheduler.h"
#include "runtime/schedule/buffer_loads.h"

#include <algorithm>
#include <cstdio>
#include <random>
#include <stdexcept>
#include <utility>

namespace abg::schedule {

std::string to_string(const bucket& b) {
  char buf[32];  // (snprintf, not string concatenation: GCC 12's -Wrestrict false positive at -O3)
  std::snprintf(buf, sizeof buf, "(%d, %d)", static_cast<int>(b.lhs), static_cast<int>(b.rhs));
  return buf;
}

std::optional<bucket_order> parse_bucket_order(std::string_view name) {
  if (name == "random") return bucket_order::random;
  if (name == "affinity") return bucket_order::affinity;
  if (name == "inside_out") return bucket_order::inside_out;
  if (name == "outside_in") return bucket_order::outside_in;
  if (name == "buffer") return bucket_order::buffer;
  return std::nullopt;
}

std::string_view to_string(bucket_order order) {
  switch (order) {
    case bucket_order::random: return "random";
    case bucket_order::affinity: return "affinity";
    case bucket_order::inside_out: return "inside_out";
    case bucket_order::outside_in: return "outside_in";
    case bucket_order::buffer: return "buffer";
  }
  return "?";
}

namespace {

// Layer k = the L-shaped set min(i, j) == k: (k, k), then alternately the rest
// of row k and column k, so consecutive buckets share partition k.
std::vector<bucket> layered(int32_t nl, int32_t nr) {
  std::vector<bucket> out;
  out.reserve(static_cast<std::size_t>(nl) * static_cast<std::size_t>(nr));
  for (int32_t k = 0; k < std::min(nl, nr); ++k) {
    out.push_back({k, k});
    for (int32_t d = k + 1; d < std::max(nl, nr); ++d) {
      if (d < nr) out.push_back({k, d});
      if (d < nl) out.push_back({d, k});
    }
  }
  return out;
}

std::vector<bucket> affinity(int32_t nl, int32_t nr, std::mt19937_64& rng) {
  std::set<bucket> remaining;
  for (int32_t i = 0; i < nl; ++i)
    for (int32_t j = 0; j < nr; ++j) remaining.insert({i, j});
  std::vector<bucket> out;
  bucket prev{0, 0};
  remaining.erase(prev);
  out.push_back(prev);
  while (!remaining.empty()) {
    bucket next{};
    if (remaining.contains(bucket{prev.rhs, prev.lhs})) {
      next = {prev.rhs, prev.lhs};
    } else {
      std::vector<bucket> sharing;
      for (const auto& b : remaining)
        if (b.lhs == prev.lhs || b.rhs == prev.rhs || b.lhs == prev.rhs || b.rhs == prev.lhs)
          sharing.push_back(b);
      const auto& pool = sharing.empty() ? std::vector<bucket>(remaining.begin(), remaining.end())
                                         : sharing;
      std::uniform_int_distribution<std::size_t> pick(0, pool.size() - 1);
      next = pool[pick(rng)];
    }
    remaining.erase(next);
    out.push_back(next);
    prev = next;
  }
  return out;
}

uint64_t mix(uint64_t x) {  // splitmix64
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

}  // namespace

std::vector<bucket> make_bucket_order(int32_t nparts_lhs, int32_t nparts_rhs, bucket_order order,
                                      uint64_t seed) {
  if (nparts_lhs < 1 || nparts_rhs < 1) throw std::invalid_argument("bucket grid must be at least 1x1");
  std::mt19937_64 rng(mix(seed));
  switch (order) {
    case bucket_order::random: {
      auto out = layered(nparts_lhs, nparts_rhs);
      std::sort(out.begin(), out.end());
      std::shuffle(out.begin(), out.end(), rng);
      return out;
    }
    case bucket_order::affinity: return affinity(nparts_lhs, nparts_rhs, rng);
    case bucket_order::inside_out: return layered(nparts_lhs, nparts_rhs);
    case bucket_order::outside_in: {
      auto out = layered(nparts_lhs, nparts_rhs);
      std::reverse(out.begin(), out.end());
      return out;
    }
    case bucket_order::buffer: throw std::invalid_argument("the buffer order needs a buffer capacity");
  }
  throw std::invalid_argument("unknown bucket order");
}

bucket_scheduler::bucket_scheduler(scheduler_config config) : config_(config) {
  if (config_.nparts_lhs < 1 || config_.nparts_rhs < 1)
    throw std::invalid_argument("bucket scheduler: nparts must be >= 1");
  if (config_.nparts_lhs > 65536 || config_.nparts_rhs > 65536)
    throw std::invalid_argument("bucket scheduler: nparts must be <= 65536");
  if (config_.shared_partitions && config_.nparts_lhs != config_.nparts_rhs)
    throw std::invalid_argument("bucket scheduler: shared partitions need nparts_lhs == nparts_rhs");
  if (config_.num_trainers < 1) throw std::invalid_argument("bucket scheduler: num_trainers must be >= 1");
  if (config_.buffer_capacity < 0 || (config_.order == bucket_order::buffer && config_.buffer_capacity < 2))
    throw std::invalid_argument("bucket scheduler: buffer_capacity must be >= 0, and >= 2 for the buffer order");
  initialised_.insert(key(0, 0));
  initialised_.insert(key(1, 0));
  owner_[0].assign(static_cast<std::size_t>(config_.nparts_lhs), no_trainer);
  owner_[1].assign(static_cast<std::size_t>(config_.nparts_rhs), no_trainer);
  writing_[0].assign(static_cast<std::size_t>(config_.nparts_lhs), 0);
  writing_[1].assign(static_cast<std::size_t>(config_.nparts_rhs), 0);
}

void bucket_scheduler::lock(part_key k, trainer_id t) {
  auto& o = owner_[k.side][static_cast<std::size_t>(k.part)];
  if (o == t) return;
  if (o != no_trainer) free_lock(k);
  o = t;
  holdings_[t].insert(k);
  ++locked_;
  ++locked_on_[k.side];
}

void bucket_scheduler::free_lock(part_key k) {
  auto& o = owner_[k.side][static_cast<std::size_t>(k.part)];
  if (o == no_trainer) return;
  if (auto it = holdings_.find(o); it != holdings_.end()) {
    it->second.erase(k);
    if (it->second.empty()) holdings_.erase(it);
  }
  if (auto& w = writing_[k.side][static_cast<std::size_t>(k.part)]; w != 0) {
    w = 0;
    if (auto it = writes_back_.find(o); it != writes_back_.end() && --it->second == 0) writes_back_.erase(it);
  }
  o = no_trainer;
  --locked_;
  --locked_on_[k.side];
}

part_key bucket_scheduler::key(int32_t side, int32_t part) const {
  return {config_.shared_partitions ? 0 : side, part};
}

bool bucket_scheduler::locked_side(int32_t side) const {
  if (config_.shared_partitions) return config_.nparts_lhs > 1;
  return (side == 0 ? config_.nparts_lhs : config_.nparts_rhs) > 1;
}

std::vector<part_key> bucket_scheduler::partitions_of(bucket b) const {
  std::vector<part_key> out;
  if (locked_side(0)) out.push_back(key(0, b.lhs));
  if (locked_side(1) && (out.empty() || key(1, b.rhs) != out[0])) out.push_back(key(1, b.rhs));
  return out;
}

std::size_t bucket_scheduler::index_of(bucket b) const {
  return static_cast<std::size_t>(b.lhs) * static_cast<std::size_t>(config_.nparts_rhs) +
         static_cast<std::size_t>(b.rhs);
}

bool bucket_scheduler::is_initialised(int32_t side, int32_t part) const {
  return initialised_.contains(key(side, part));
}

uint64_t bucket_scheduler::version(part_key k) const {
  auto it = versions_.find(k);
  return it == versions_.end() ? base_version_ : it->second;
}

void bucket_scheduler::start_epoch(int32_t epoch_index, const std::vector<bucket>& done) {
  if (!active_.empty() || locked_ != 0)
    throw std::logic_error("bucket scheduler: epoch started while partitions are held");
  for (const auto& b : done)
    if (b.lhs < 0 || b.rhs < 0 || b.lhs >= config_.nparts_lhs || b.rhs >= config_.nparts_rhs)
      throw std::invalid_argument("bucket scheduler: bucket " + to_string(b) + " done before is not on the grid");
  epoch_ = epoch_index;
  started_ = true;
  order_ = config_.order == bucket_order::buffer
             ? make_buffer_order(config_.nparts_lhs, config_.nparts_rhs, planned_capacity(),
                                 config_.shared_partitions)
             : make_bucket_order(config_.nparts_lhs, config_.nparts_rhs, config_.order,
                                 config_.seed ^ (static_cast<uint64_t>(epoch_index) * 0x100000001b3ULL));
  state_.assign(order_.size(), state::pending);
  position_.resize(order_.size());
  for (std::size_t p = 0; p < order_.size(); ++p) position_[index_of(order_[p])] = static_cast<uint32_t>(p);
  pending_.fill(order_.size());
  released_ = 0;
  unsaved_.clear();
  eligible_.clear();
  if (init_rule()) {
    eligible_.reset(order_.size());
    const auto known = initialised_;
    initialised_.clear();
    for (const auto& k : known) initialise(k);
  }
  for (const auto& b : done) {
    const auto i = index_of(b);
    if (state_[i] != state::pending) continue;
    state_[i] = state::done;
    pending_.erase(position_[i]);
    if (init_rule()) eligible_.erase(position_[i]);
    ++released_;
    initialise(key(0, b.lhs));
    initialise(key(1, b.rhs));
  }
}

// Rows of an initialised lhs partition and columns of an initialised rhs
// partition become eligible (with shared partitions, both of partition k).
void bucket_scheduler::initialise(part_key k) {
  if (!initialised_.insert(k).second || !init_rule()) return;
  auto add = [&](bucket b) {
    const auto i = index_of(b);
    if (state_[i] == state::pending) eligible_.insert(position_[i]);
  };
  const bool lhs = config_.shared_partitions || k.side == 0, rhs = config_.shared_partitions || k.side == 1;
  if (lhs && k.part < config_.nparts_lhs)
    for (int32_t r = 0; r < config_.nparts_rhs; ++r) add({k.part, r});
  if (rhs && k.part < config_.nparts_rhs)
    for (int32_t l = 0; l < config_.nparts_lhs; ++l) add({l, k.part});
}

void bucket_scheduler::set_pending(bucket b, bool pending) {
  const auto i = index_of(b);
  state_[i] = pending ? state::pending : state::active;
  if (pending) {
    pending_.insert(position_[i]);
    if (init_rule() && (is_initialised(0, b.lhs) || is_initialised(1, b.rhs))) eligible_.insert(position_[i]);
  } else {
    pending_.erase(position_[i]);
    if (init_rule()) eligible_.erase(position_[i]);
  }
}

void bucket_scheduler::reset(uint64_t version) {
  started_ = false;
  order_.clear();
  state_.clear();
  position_.clear();
  pending_.clear();
  eligible_.clear();
  released_ = 0;
  active_.clear();
  for (auto& side : owner_) std::fill(side.begin(), side.end(), no_trainer);
  holdings_.clear();
  for (auto& side : writing_) std::fill(side.begin(), side.end(), 0);
  writes_back_.clear();
  locked_ = 0;
  locked_on_[0] = locked_on_[1] = 0;
  unsaved_.clear();
  reserved_.clear();
  awaited_by_.clear();
  versions_.clear();
  base_version_ = version;
}

bool bucket_scheduler::allowed(bucket b, trainer_id trainer) const {
  if (b.lhs < 0 || b.rhs < 0 || b.lhs >= config_.nparts_lhs || b.rhs >= config_.nparts_rhs) return false;
  if (!started_ || state_[index_of(b)] != state::pending) return false;
  // partitions_of(b) without building it: acquire calls this for whole rows.
  // A partition another trainer's reservation awaits is for that one only:
  // its holder writes it back at its next acquire.
  auto other_holds = [&](part_key k) {
    const auto o = owner(k);
    if (o != no_trainer && o != trainer) return true;
    // Its own write-back: several trainers take another bucket meanwhile
    // (one trainer's order waits for it, in acquire).
    if (o == trainer && config_.num_trainers > 1 && writing(k)) return true;
    if (awaited_by_.empty()) return false;
    const auto w = awaited_by_.find(k);
    return w != awaited_by_.end() && w->second != trainer;
  };
  if ((locked_side(0) && other_holds(key(0, b.lhs))) || (locked_side(1) && other_holds(key(1, b.rhs)))) return false;
  if (config_.tree_init_order && epoch_ == config_.first_epoch && !is_initialised(0, b.lhs) &&
      !is_initialised(1, b.rhs))
    return false;
  return true;
}

int bucket_scheduler::swap_cost(bucket candidate, const std::set<part_key>& have) const {
  int cost = 0;
  for (const auto& p : partitions_of(candidate))
    if (!have.contains(p)) ++cost;
  return cost;
}

std::optional<bucket> bucket_scheduler::active(trainer_id trainer) const {
  auto it = active_.find(trainer);
  if (it == active_.end()) return std::nullopt;
  return it->second;
}

std::set<part_key> bucket_scheduler::held(trainer_id trainer) const {
  auto it = holdings_.find(trainer);
  if (it == holdings_.end()) return {};
  if (!writes_back_.contains(trainer)) return it->second;
  std::set<part_key> out;
  for (const auto& k : it->second)
    if (!writing(k)) out.insert(k);
  return out;
}

void bucket_scheduler::start_writing(trainer_id t, const std::vector<part_key>& drop) {
  for (const auto& k : drop) {
    auto& w = writing_[k.side][static_cast<std::size_t>(k.part)];
    if (w != 0) continue;
    w = 1;
    ++writes_back_[t];
  }
}

std::size_t bucket_scheduler::next_use(part_key k) const {
  std::size_t best = order_.size();
  auto consider = [&](bucket b) {
    const auto i = index_of(b);
    if (state_[i] == state::pending) best = std::min<std::size_t>(best, position_[i]);
  };
  const bool lhs = k.side == 0;
  const bool rhs = k.side == 1 || config_.shared_partitions;
  if (lhs)
    for (int32_t j = 0; j < config_.nparts_rhs; ++j) consider({k.part, j});
  if (rhs)
    for (int32_t i = 0; i < config_.nparts_lhs; ++i) consider({i, k.part});
  return best;
}

void bucket_scheduler::drop_into(trainer_id trainer, grant& g, const std::vector<part_key>& keep) const {
  std::vector<part_key> others;
  for (const auto& k : held(trainer))
    if (std::find(keep.begin(), keep.end(), k) == keep.end()) others.push_back(k);
  // A buffer keeps those needed soonest (a bucket is coming: `keep` is its partitions).
  std::size_t room = 0;
  if (config_.buffer_capacity > 0 && config_.num_trainers == 1 && !keep.empty() &&
      static_cast<std::size_t>(planned_capacity()) > keep.size())
    room = static_cast<std::size_t>(planned_capacity()) - keep.size();
  if (room > 0 && !others.empty()) {
    std::vector<std::pair<std::size_t, part_key>> by_use;
    for (const auto& k : others) by_use.push_back({next_use(k), k});
    std::sort(by_use.begin(), by_use.end());
    others.clear();
    for (std::size_t i = 0; i < by_use.size(); ++i)
      // Kept: within the room and needed again this epoch.
      if (i >= room || by_use[i].first == order_.size()) others.push_back(by_use[i].second);
  }
  g.drop.insert(g.drop.end(), others.begin(), others.end());
}

std::optional<std::size_t> bucket_scheduler::earliest_allowed(const std::vector<int32_t>& lhs,
                                                              const std::vector<int32_t>& rhs,
                                                              trainer_id trainer) const {
  std::optional<std::size_t> best;
  for (auto l : lhs)
    for (auto r : rhs) {
      const bucket b{l, r};
      const auto p = position_[index_of(b)];
      if ((!best || p < *best) && allowed(b, trainer)) best = p;
    }
  return best;
}

// The pending buckets in order until one is allowed (in the first epoch only
// those with an initialised side, kept apart as partitions get initialised):
// the ones passed are those of partitions other trainers hold.
// With many trainers, most pending buckets may touch a partition another
// trainer holds and the walk passes nearly all of them; then the buckets
// whose partitions are all free (or the trainer's) are fewer, and the
// earliest allowed one among them is the same bucket.
std::optional<std::size_t> bucket_scheduler::first_allowed(trainer_id trainer) const {
  // Partitions free for this trainer on each side, counted before listed.
  auto free_count = [&](int32_t side, int32_t n) -> std::uint64_t {
    if (!locked_side(side)) return static_cast<std::uint64_t>(n);
    const auto k = key(side, 0).side;
    std::size_t own = 0;
    if (auto it = holdings_.find(trainer); it != holdings_.end())
      for (const auto& h : it->second) own += h.side == k;
    return static_cast<std::uint64_t>(n) - (locked_on_[k] - own);
  };
  const auto free_pairs = free_count(0, config_.nparts_lhs) * free_count(1, config_.nparts_rhs);
  if (locked_ != 0 && free_pairs * free_pairs < order_.size()) {
    auto free_on = [&](int32_t side, int32_t n) {
      std::vector<int32_t> out;
      for (int32_t i = 0; i < n; ++i) {
        const auto o = locked_side(side) ? owner(key(side, i)) : no_trainer;
        if (o == no_trainer || o == trainer) out.push_back(i);
      }
      return out;
    };
    // A walk meets an allowed bucket after about (P_l P_r) / (F_l F_r)
    // buckets when F of the P partitions of each side are free: enumerating
    // the F_l F_r free pairs is the cheaper when (F_l F_r)^2 < P_l P_r.
    return earliest_allowed(free_on(0, config_.nparts_lhs), free_on(1, config_.nparts_rhs), trainer);
  }
  // In the first epoch an allowed bucket has an initialised side free for
  // this trainer. When other trainers hold every initialised partition the
  // walk would pass all the eligible buckets (P per partition and side) to
  // find none: 3.6-4.2 ms at P = 4096 with 4 trainers.
  if (init_rule() && std::none_of(initialised_.begin(), initialised_.end(), [&](const part_key& k) {
        return !locked_side(k.side) || owner(k) == no_trainer || owner(k) == trainer;
      }))
    return std::nullopt;
  const auto& candidates = init_rule() ? eligible_ : pending_;
  for (auto p = candidates.next(0); p != position_set::npos; p = candidates.next(p + 1))
    if (allowed(order_[p], trainer)) return p;
  return std::nullopt;
}

// The least swap cost first (0: both partitions held; 1: one of them; 2:
// none), the earliest in order among equals: cost-0 and cost-1 buckets lie in
// the rows and columns of the (at most two) partitions held, cost 2 is the
// first allowed bucket.
std::optional<std::size_t> bucket_scheduler::least_swaps(trainer_id trainer, const std::set<part_key>& have) const {
  auto held_on = [&](int32_t side) {
    std::vector<int32_t> out;
    for (const auto& k : have)
      if (k == key(side, k.part)) out.push_back(k.part);
    return out;
  };
  auto every = [](int32_t n) {
    std::vector<int32_t> out(static_cast<std::size_t>(n));
    for (int32_t i = 0; i < n; ++i) out[static_cast<std::size_t>(i)] = i;
    return out;
  };
  // A side that is not locked costs nothing: every partition of it counts as held.
  const auto lhs_held = locked_side(0) ? held_on(0) : every(config_.nparts_lhs);
  const auto rhs_held = locked_side(1) ? held_on(1) : every(config_.nparts_rhs);
  if (auto zero = earliest_allowed(lhs_held, rhs_held, trainer)) return zero;
  std::optional<std::size_t> one;
  auto consider = [&](std::optional<std::size_t> p) {
    if (p && (!one || *p < *one)) one = p;
  };
  // Candidates of cost <= 1 (cost 0 ones are not allowed: found above).
  consider(earliest_allowed(lhs_held, every(config_.nparts_rhs), trainer));
  consider(earliest_allowed(every(config_.nparts_lhs), rhs_held, trainer));
  if (config_.shared_partitions) // (x, x) is one partition
    for (int32_t x = 0; x < config_.nparts_lhs; ++x) {
      const bucket b{x, x};
      const auto p = position_[index_of(b)];
      if ((!one || p < *one) && allowed(b, trainer)) one = p;
    }
  if (one && swap_cost(order_[*one], have) <= 1) return one;
  return first_allowed(trainer);
}

void bucket_scheduler::cancel_reservation(trainer_id trainer) {
  auto r = reserved_.find(trainer);
  if (r == reserved_.end()) return;
  for (const auto& k : r->second.awaited) awaited_by_.erase(k);
  // Nobody awaits these: a partition locked for a reservation is not awaitable.
  for (const auto& k : r->second.locked)
    if (owner(k) == trainer) free_lock(k);
  set_pending(r->second.next, true);
  reserved_.erase(r);
}

std::optional<bucket> bucket_scheduler::reserved(trainer_id trainer) const {
  auto r = reserved_.find(trainer);
  if (r == reserved_.end()) return std::nullopt;
  return r->second.next;
}

std::vector<part_version> bucket_scheduler::take_handed(trainer_id trainer) {
  auto r = reserved_.find(trainer);
  if (r == reserved_.end()) return {};
  return std::exchange(r->second.handed, {});
}

void bucket_scheduler::hand_over(part_key k) {
  auto w = awaited_by_.find(k);
  if (w == awaited_by_.end()) return;
  const auto t = w->second;
  awaited_by_.erase(w);
  auto r = reserved_.find(t);
  if (r == reserved_.end() || owner(k) != no_trainer) return;
  std::erase(r->second.awaited, k);
  lock(k, t);
  r->second.locked.push_back(k);
  r->second.handed.push_back({k, version(k)});
}

bool bucket_scheduler::awaitable(bucket b, trainer_id trainer) const {
  if (!started_ || state_[index_of(b)] != state::pending) return false;
  if (init_rule() && !is_initialised(0, b.lhs) && !is_initialised(1, b.rhs)) return false;
  for (const auto& k : partitions_of(b)) {
    if (auto w = awaited_by_.find(k); w != awaited_by_.end() && w->second != trainer) return false;
    const auto o = owner(k);
    // Its own partition being written back is awaited like another's.
    if (o == no_trainer || (o == trainer && !writing(k))) continue;
    // Kept or locked by its holder for its own next bucket: not written back soon.
    if (auto r = reserved_.find(o); r != reserved_.end()) {
      const auto next = r->second.next;
      if ((locked_side(0) && key(0, next.lhs) == k) || (locked_side(1) && key(1, next.rhs) == k)) return false;
    }
  }
  return true;
}

std::optional<std::size_t> bucket_scheduler::least_awaited(trainer_id trainer, const std::set<part_key>& have) const {
  std::optional<std::size_t> best;
  auto consider = [&](bucket b) {
    const auto p = position_[index_of(b)];
    if ((!best || p < *best) && awaitable(b, trainer)) best = p;
  };
  // One new partition at most: the rows and columns of those it will hold.
  for (const auto& k : have) {
    if (config_.shared_partitions || k.side == 0)
      for (int32_t r = 0; r < config_.nparts_rhs; ++r) consider({k.part, r});
    if (config_.shared_partitions || k.side == 1)
      for (int32_t l = 0; l < config_.nparts_lhs; ++l) consider({l, k.part});
  }
  if (best) return best;
  // Else the first awaitable in order, among a bounded number of pending
  // buckets: acquire stays sub-linear in the grid.
  const auto bound = 4 * static_cast<std::size_t>(config_.nparts_lhs + config_.nparts_rhs);
  std::size_t looked = 0;
  for (auto p = pending_.next(0); p != position_set::npos && looked < bound; p = pending_.next(p + 1), ++looked)
    if (awaitable(order_[p], trainer)) return p;
  return std::nullopt;
}

grant bucket_scheduler::acquire(trainer_id trainer) {
  auto g = choose(trainer);
  start_writing(trainer, g.drop);
  return g;
}

grant bucket_scheduler::choose(trainer_id trainer) {
  grant g;
  g.epoch = epoch_;
  if (auto current = active(trainer)) {
    g.what = grant::kind::bucket;
    g.assigned = *current;
    return g;
  }
  // What the trainer has in memory: what it holds less what is locked for
  // its reservation (read ahead, fetched by this grant).
  auto have = held(trainer);
  std::optional<std::size_t> best;
  if (auto r = reserved_.find(trainer); r != reserved_.end()) {
    auto without_reserved = have;
    for (const auto& k : r->second.locked) without_reserved.erase(k);
    if (started_ && !paused_ && r->second.awaited.empty()) {
      best = position_[index_of(r->second.next)];
      have = std::move(without_reserved);
      reserved_.erase(r);
    } else if (started_ && !paused_ && !least_swaps(trainer, without_reserved)) {
      // A partition it awaits is still another trainer's, which writes it
      // back at its next acquire at the latest, and nothing else is allowed:
      // the trainer writes back what the reserved bucket does not need and
      // waits for the rest to be handed over.
      drop_into(trainer, g, partitions_of(r->second.next));
      g.what = g.drop.empty() ? grant::kind::wait : grant::kind::drop;
      return g;
    } else {
      // Paused, or another bucket can go now.
      cancel_reservation(trainer);
      have = held(trainer);
      if (started_ && !paused_) best = least_swaps(trainer, have);
    }
  } else if (started_ && !paused_) {
    best = config_.num_trainers == 1 ? first_allowed(trainer) : least_swaps(trainer, have);
  }
  const auto own_write_back = [&](const std::vector<part_key>& parts) {
    return std::any_of(parts.begin(), parts.end(), [&](const part_key& k) { return owner(k) == trainer && writing(k); });
  };
  // One trainer: its order's next bucket waits for the write-back of a
  // partition it needs. Several: nothing allowed while its own write-back
  // runs, it waits for that to end rather than give up what it holds.
  if ((best && config_.num_trainers == 1 && own_write_back(partitions_of(order_[*best]))) ||
      (!best && writes_back_.contains(trainer))) {
    g.what = grant::kind::wait;
    return g;
  }
  if (!best) {
    // Nothing for this trainer: what it holds may be what the others need.
    drop_into(trainer, g, {});
    g.what = g.drop.empty() ? grant::kind::wait : grant::kind::drop;
    return g;
  }
  const bucket b = order_[*best];
  const auto parts = partitions_of(b);
  g.what = grant::kind::bucket;
  g.assigned = b;
  for (const auto& k : parts) {
    if (!have.contains(k)) g.fetch.push_back({k, version(k)});
    lock(k, trainer);
  }
  set_pending(b, false);
  active_[trainer] = b;
  // Several trainers: the next bucket, given what the trainer will hold; its
  // partitions the trainer holds are kept, the others locked for it.
  auto keep = parts;
  std::optional<bucket> next;
  if (reserves()) {
    auto will_hold = have;
    will_hold.insert(parts.begin(), parts.end());
    auto p = least_swaps(trainer, will_hold);
    if (!p) p = least_awaited(trainer, will_hold);
    if (p) {
      next = order_[*p];
      for (const auto& k : partitions_of(*next))
        if (will_hold.contains(k) && std::find(keep.begin(), keep.end(), k) == keep.end()) keep.push_back(k);
    }
  }
  drop_into(trainer, g, keep);
  if (next) {
    reservation r{*next, {}};
    for (const auto& k : partitions_of(*next)) {
      if (owner(k) == trainer && !writing(k)) continue;
      if (owner(k) != no_trainer) {
        r.awaited.push_back(k);
        awaited_by_[k] = trainer;
        g.awaited.push_back(k);
        continue;
      }
      lock(k, trainer);
      r.locked.push_back(k);
      g.ahead.push_back({k, version(k)});
    }
    set_pending(*next, false);
    reserved_[trainer] = std::move(r);
  } else if (read_ahead_slots() > 0 && config_.num_trainers == 1) {
    // The bucket that would come next if this one were released now.
    // Its partitions the trainer will not hold, those this grant drops
    // included: they are read after the write-back, at its version or later.
    if (auto after = first_allowed(trainer)) {
      auto kept = held(trainer);
      for (const auto& k : g.drop) kept.erase(k);
      for (const auto& k : partitions_of(order_[*after]))
        if (!kept.contains(k) && g.ahead.size() < static_cast<std::size_t>(read_ahead_slots()))
          g.ahead.push_back({k, version(k)});
    }
  }
  return g;
}

int32_t bucket_scheduler::read_ahead_slots() const {
  const auto bucket_needs = static_cast<int32_t>(locked_side(0)) + static_cast<int32_t>(locked_side(1));
  if (config_.buffer_capacity <= 0 || bucket_needs == 0) return 0;
  // Several trainers: room for the bucket and the reserved next one.
  if (config_.num_trainers > 1) return config_.buffer_capacity >= 2 * bucket_needs ? bucket_needs : 0;
  // Planning for K - 1 must leave the bucket's partitions, and the buffer
  // order's least capacity (2), room.
  return config_.buffer_capacity > std::max<int32_t>(bucket_needs, 2) ? 1 : 0;
}

bool bucket_scheduler::release(trainer_id trainer, bucket b) {
  auto it = active_.find(trainer);
  if (it == active_.end() || it->second != b) return false;
  active_.erase(it);
  state_[index_of(b)] = state::done;
  ++released_;
  initialise(key(0, b.lhs));
  initialise(key(1, b.rhs));
  auto parts = partitions_of(b);
  if (!parts.empty()) unsaved_[trainer].push_back({b, std::set<part_key>(parts.begin(), parts.end())});
  return true;
}

bool bucket_scheduler::unlock(trainer_id trainer, const std::vector<part_version>& written) {
  std::set<part_key> seen;
  for (const auto& w : written) {
    // The same version: written back unchanged (a bucket without edges), nothing stored.
    if (w.key.side < 0 || w.key.side > 1 || w.key.part < 0 ||
        static_cast<std::size_t>(w.key.part) >= owner_[w.key.side].size() || owner(w.key) != trainer ||
        w.version < version(w.key) || !seen.insert(w.key).second)
      return false;
  }
  // Those locked for its reservation were never fetched: nothing to write back.
  if (auto r = reserved_.find(trainer); r != reserved_.end())
    for (const auto& w : written)
      if (std::find(r->second.locked.begin(), r->second.locked.end(), w.key) != r->second.locked.end()) return false;
  auto active_bucket = active(trainer);
  for (const auto& w : written) {
    // The partitions of the bucket being trained stay locked: they are written back after it.
    if (active_bucket) {
      auto parts = partitions_of(*active_bucket);
      if (std::find(parts.begin(), parts.end(), w.key) != parts.end()) return false;
    }
  }
  for (const auto& w : written) {
    free_lock(w.key);
    versions_[w.key] = w.version;
    hand_over(w.key);
  }
  auto& list = unsaved_[trainer];
  for (auto& u : list)
    for (const auto& w : written) u.pending.erase(w.key);
  std::erase_if(list, [](const unsaved& u) { return u.pending.empty(); });
  if (list.empty()) unsaved_.erase(trainer);
  return true;
}

std::vector<bucket> bucket_scheduler::trainer_died(trainer_id trainer) {
  std::vector<bucket> requeued;
  cancel_reservation(trainer);
  // Those being written back too: the servers keep the version before.
  const auto holdings = holdings_.contains(trainer) ? holdings_.at(trainer) : std::set<part_key>{};
  for (const auto& k : holdings) {
    free_lock(k);
    hand_over(k); // at the version last written back: what the server has
  }
  if (auto it = active_.find(trainer); it != active_.end()) {
    requeued.push_back(it->second);
    set_pending(it->second, true);
    active_.erase(it);
  }
  if (auto it = unsaved_.find(trainer); it != unsaved_.end()) {
    for (const auto& u : it->second) {
      if (state_[index_of(u.trained)] != state::done) continue;
      set_pending(u.trained, true);
      --released_;
      requeued.push_back(u.trained);
    }
    unsaved_.erase(it);
  }
  return requeued;
}

}  // namespace abg::schedule
