#include "runtime/schedule/buffer_loads.h"

#include <algorithm>
#include <list>
#include <map>
#include <set>
#include <stdexcept>

namespace abg::schedule {

namespace {

std::int64_t lru_loads(const std::vector<bucket>& order, int32_t capacity, bool shared_partitions) {
  std::list<part_key> recent; // most recently used first
  std::map<part_key, std::list<part_key>::iterator> resident;
  std::int64_t loads = 0;
  for (const auto& b : order) {
    // The rhs partition first, then the lhs one: the order in which the
    // count of issue "Bigger than memory" was made (PBG's inside_out, 16
    // partitions, room for 4: 129 loads; lhs first gives 130).
    const part_key need[] = {{shared_partitions ? 0 : 1, b.rhs}, {0, b.lhs}};
    for (const auto& k : need) {
      if (auto it = resident.find(k); it != resident.end()) {
        recent.splice(recent.begin(), recent, it->second);
        continue;
      }
      if (static_cast<int32_t>(resident.size()) == capacity) {
        // The least recently used that this bucket does not need (the other
        // partition of the bucket was just touched: it is never the last).
        auto victim = std::prev(recent.end());
        if (*victim == need[0] || *victim == need[1]) --victim;
        resident.erase(*victim);
        recent.erase(victim);
      }
      recent.push_front(k);
      resident[k] = recent.begin();
      ++loads;
    }
  }
  return loads;
}

std::int64_t belady_loads(const std::vector<bucket>& order, int32_t capacity, bool shared_partitions) {
  const auto n = order.size();
  auto keys = [&](std::size_t t) {
    return std::pair<part_key, part_key>{{0, order[t].lhs}, {shared_partitions ? 0 : 1, order[t].rhs}};
  };
  // next[t]: for bucket t's two partitions, the next bucket that needs each.
  std::vector<std::pair<std::size_t, std::size_t>> next(n);
  std::map<part_key, std::size_t> seen;
  for (std::size_t t = n; t-- > 0;) {
    auto [l, r] = keys(t);
    auto after = [&](const part_key& k) {
      auto it = seen.find(k);
      return it == seen.end() ? n : it->second;
    };
    next[t] = {after(l), after(r)};
    seen[l] = t;
    seen[r] = t;
  }
  std::map<part_key, std::size_t> resident; // partition -> its next use
  std::set<std::pair<std::size_t, part_key>> by_next_use;
  std::int64_t loads = 0;
  for (std::size_t t = 0; t < n; ++t) {
    auto [l, r] = keys(t);
    for (auto k : {l, r}) {
      if (resident.contains(k)) continue;
      if (static_cast<int32_t>(resident.size()) == capacity) {
        auto victim = std::prev(by_next_use.end());
        if (victim->second == l || victim->second == r) --victim;
        resident.erase(victim->second);
        by_next_use.erase(victim);
      }
      resident[k] = t;
      by_next_use.insert({t, k});
      ++loads;
    }
    // Both are used now: their next use is what comes after this bucket.
    const std::size_t uses[] = {next[t].first, next[t].second};
    const part_key ks[] = {l, r};
    for (int i = 0; i < 2; ++i) {
      auto& at = resident[ks[i]];
      by_next_use.erase({at, ks[i]});
      at = uses[i];
      by_next_use.insert({at, ks[i]});
    }
  }
  return loads;
}

} // namespace

std::int64_t count_loads(const std::vector<bucket>& order, int32_t capacity, bool shared_partitions,
                         eviction policy) {
  if (capacity < 2) throw std::invalid_argument("count_loads: a bucket needs a buffer of at least 2 partitions");
  return policy == eviction::least_recently_used ? lru_loads(order, capacity, shared_partitions)
                                                 : belady_loads(order, capacity, shared_partitions);
}

namespace {

// Groups of `size` consecutive partitions of [0, n).
std::vector<std::vector<int32_t>> groups_of(int32_t n, int32_t size) {
  std::vector<std::vector<int32_t>> out;
  for (int32_t first = 0; first < n; first += size) {
    out.emplace_back();
    for (int32_t p = first; p < std::min(n, first + size); ++p) out.back().push_back(p);
  }
  return out;
}

} // namespace

std::vector<bucket> make_buffer_order(int32_t nparts_lhs, int32_t nparts_rhs, int32_t capacity,
                                      bool shared_partitions) {
  if (capacity < 2) throw std::invalid_argument("buffer order: capacity must be at least 2");
  if (nparts_lhs < 1 || nparts_rhs < 1) throw std::invalid_argument("buffer order: nparts must be >= 1");
  std::vector<bucket> out;
  out.reserve(static_cast<std::size_t>(nparts_lhs) * static_cast<std::size_t>(nparts_rhs));
  if (!shared_partitions) {
    // capacity - 1 lhs partitions stay; every rhs partition passes through
    // the last slot, forwards and backwards in turn so that the one resident
    // at a group change is used again at once.
    auto groups = groups_of(nparts_lhs, capacity - 1);
    for (std::size_t g = 0; g < groups.size(); ++g)
      for (int32_t step = 0; step < nparts_rhs; ++step) {
        const int32_t r = g % 2 == 0 ? step : nparts_rhs - 1 - step;
        for (auto l : groups[g]) out.push_back({l, r});
      }
    return out;
  }
  if (nparts_lhs != nparts_rhs) throw std::invalid_argument("buffer order: shared partitions need nparts_lhs == nparts_rhs");
  auto groups = groups_of(nparts_lhs, capacity - 1);
  for (std::size_t a = 0; a < groups.size(); ++a) {
    // The group's own buckets (diagonals included), then every partition of
    // the later groups through the last slot, the next group's last.
    for (auto i : groups[a])
      for (auto j : groups[a]) out.push_back({i, j});
    for (std::size_t b = groups.size() - 1; b > a; --b)
      for (auto x : groups[b])
        for (auto i : groups[a]) {
          out.push_back({i, x});
          out.push_back({x, i});
        }
  }
  return out;
}

} // namespace abg::schedule
