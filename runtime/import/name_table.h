// A string -> dense id table for the importer's hot loop: open addressing with
// hash tags in the slots, names copied into a stable arena. Ids are given in
// insertion order, so they double as indexes into per-entity arrays.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

namespace abg::import {

class name_table {
public:
  static constexpr std::uint32_t npos = UINT32_MAX;

  name_table();

  /// The id of `name`, inserting it with the next id when absent.
  std::uint32_t intern(std::string_view name);
  /// The id of `name`, or npos.
  std::uint32_t find(std::string_view name) const;
  std::string_view name(std::uint32_t id) const { return {entries_[id].data, entries_[id].size}; }
  std::size_t size() const { return entries_.size(); }

private:
  struct entry {
    const char* data;
    std::uint32_t size;
  };
  struct slot {
    std::uint32_t id = npos;
    std::uint32_t tag = 0; // upper hash bits, compared before the name
  };
  const char* store(std::string_view name);
  void grow();

  std::vector<entry> entries_;
  std::vector<slot> slots_;
  std::uint64_t mask_ = 0;
  std::vector<std::unique_ptr<char[]>> blocks_;
  char* block_pos_ = nullptr;
  std::size_t block_left_ = 0;
};

} // namespace abg::import
