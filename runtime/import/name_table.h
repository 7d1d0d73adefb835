// A string -> dense id table for the importer's hot loop: open addressing with
// hash tags and name pointers in the slots, names stored length-prefixed in a
// stable arena. Ids are given in insertion order, so they double as indexes
// into per-entity arrays. Lookups are memory-bound: callers hash a batch of
// names first and prefetch() them, so the cache misses of a batch overlap.
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>
#include <string_view>
#include <vector>

namespace abg::import {

class name_table {
public:
  static constexpr std::uint32_t npos = UINT32_MAX;

  name_table();

  static std::uint64_t hash(std::string_view name);

  /// Brings the slot that `hash` starts probing at into the cache.
  void prefetch_slot(std::uint64_t h) const { __builtin_prefetch(&slots_[static_cast<std::uint32_t>(h) & mask_]); }
  /// Brings the name of that slot's entry into the cache (after prefetch_slot).
  void prefetch_name(std::uint64_t h) const {
    if (auto* p = slots_[static_cast<std::uint32_t>(h) & mask_].name)
      __builtin_prefetch(p);
  }

  /// The id of `name`, inserting it with the next id when absent; `h` = hash(name).
  std::uint32_t intern(std::string_view name, std::uint64_t h);
  std::uint32_t intern(std::string_view name) { return intern(name, hash(name)); }
  /// The id of `name`, or npos.
  std::uint32_t find(std::string_view name) const;
  std::string_view name(std::uint32_t id) const { return unpack(entries_[id]); }
  std::size_t size() const { return entries_.size(); }

private:
  struct slot {
    const char* name = nullptr; // length-prefixed, in the arena
    std::uint32_t id = npos;
    std::uint32_t tag = 0; // low hash bits: compared before the name, and rehash without it
  };
  static std::string_view unpack(const char* p) {
    std::uint32_t size;
    std::memcpy(&size, p, sizeof size);
    return {p + sizeof size, size};
  }
  const char* store(std::string_view name);
  void grow();

  std::vector<const char*> entries_;
  std::vector<slot> slots_;
  std::uint64_t mask_ = 0;
  std::vector<std::unique_ptr<char[]>> blocks_;
  char* block_pos_ = nullptr;
  std::size_t block_left_ = 0;
};

} // namespace abg::import
