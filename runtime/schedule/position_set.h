// An ordered set of positions [0, n) with the next member at or after a
// position found in O(log64 n): a bitset and summary levels above it (bit w
// of level k+1 says word w of level k is non-zero). The scheduler keeps the
// pending buckets' positions in the bucket order here, so finding the next
// one to hand out does not scan the grid (P = 4096 is 16.7 M buckets).
#pragma once

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

namespace abg::schedule {

class position_set {
public:
  static constexpr std::size_t npos = std::numeric_limits<std::size_t>::max();

  /// Every position of [0, n) a member.
  void fill(std::size_t n) {
    levels_.clear();
    size_ = n;
    std::size_t bits = n;
    do {
      std::vector<std::uint64_t> level((bits + 63) / 64, ~std::uint64_t{0});
      if (bits % 64 != 0 && !level.empty())
        level.back() = (std::uint64_t{1} << (bits % 64)) - 1;
      levels_.push_back(std::move(level));
      bits = levels_.back().size();
    } while (bits > 1);
  }
  /// No member, positions [0, n) possible.
  void reset(std::size_t n) {
    fill(n);
    for (auto& level : levels_)
      std::fill(level.begin(), level.end(), 0);
  }
  void clear() {
    levels_.clear();
    size_ = 0;
  }

  bool contains(std::size_t p) const { return p < size_ && (levels_[0][p / 64] >> (p % 64) & 1) != 0; }

  void insert(std::size_t p) {
    for (auto& level : levels_) {
      const bool was_empty = level[p / 64] == 0;
      level[p / 64] |= std::uint64_t{1} << (p % 64);
      if (!was_empty)
        return;
      p /= 64;
    }
  }

  void erase(std::size_t p) {
    for (auto& level : levels_) {
      level[p / 64] &= ~(std::uint64_t{1} << (p % 64));
      if (level[p / 64] != 0)
        return;
      p /= 64;
    }
  }

  /// The smallest member >= from, or npos.
  std::size_t next(std::size_t from) const {
    if (from >= size_)
      return npos;
    // Up: the first level where a word holds a member at or after the position.
    std::size_t level = 0, p = from;
    while (true) {
      const auto& words = levels_[level];
      const std::size_t w = p / 64;
      const std::uint64_t rest = w < words.size() ? words[w] & (~std::uint64_t{0} << (p % 64)) : 0;
      if (rest != 0) {
        p = w * 64 + static_cast<std::size_t>(std::countr_zero(rest));
        break;
      }
      if (level + 1 == levels_.size())
        return npos;
      ++level;
      p = w + 1; // the words after this one, a level up
      if (p >= levels_[level].size() * 64)
        return npos;
    }
    // Down: the first member below that summary bit.
    while (level > 0) {
      --level;
      p = p * 64 + static_cast<std::size_t>(std::countr_zero(levels_[level][p]));
    }
    return p;
  }

private:
  std::vector<std::vector<std::uint64_t>> levels_;
  std::size_t size_ = 0;
};

} // namespace abg::schedule
