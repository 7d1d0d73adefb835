#include "runtime/import/name_table.h"

#include <cstring>

#include <xxhash.h>

namespace abg::import {

namespace {
constexpr std::size_t block_size = 1 << 20;
}

name_table::name_table() : slots_(1024), mask_(1023) {}

const char* name_table::store(std::string_view name) {
  if (name.size() > block_left_) {
    auto size = std::max(block_size, name.size());
    blocks_.push_back(std::make_unique<char[]>(size));
    block_pos_ = blocks_.back().get();
    block_left_ = size;
  }
  auto* p = block_pos_;
  if (!name.empty())
    std::memcpy(p, name.data(), name.size());
  block_pos_ += name.size();
  block_left_ -= name.size();
  return p;
}

std::uint32_t name_table::find(std::string_view name) const {
  auto h = XXH3_64bits(name.data(), name.size());
  auto tag = static_cast<std::uint32_t>(h >> 32);
  for (auto i = h & mask_;; i = (i + 1) & mask_) {
    const auto& s = slots_[i];
    if (s.id == npos)
      return npos;
    if (s.tag == tag) {
      const auto& e = entries_[s.id];
      if (e.size == name.size() && std::memcmp(e.data, name.data(), name.size()) == 0)
        return s.id;
    }
  }
}

std::uint32_t name_table::intern(std::string_view name) {
  auto h = XXH3_64bits(name.data(), name.size());
  auto tag = static_cast<std::uint32_t>(h >> 32);
  for (auto i = h & mask_;; i = (i + 1) & mask_) {
    auto& s = slots_[i];
    if (s.id == npos) {
      auto id = static_cast<std::uint32_t>(entries_.size());
      entries_.push_back({store(name), static_cast<std::uint32_t>(name.size())});
      s = {id, tag};
      if (entries_.size() * 2 > slots_.size())
        grow();
      return id;
    }
    if (s.tag == tag) {
      const auto& e = entries_[s.id];
      if (e.size == name.size() && std::memcmp(e.data, name.data(), name.size()) == 0)
        return s.id;
    }
  }
}

void name_table::grow() {
  std::vector<slot> old(slots_.size() * 2);
  old.swap(slots_);
  mask_ = slots_.size() - 1;
  for (auto& s : old) {
    if (s.id == npos)
      continue;
    const auto& e = entries_[s.id];
    auto h = XXH3_64bits(e.data, e.size);
    auto i = h & mask_;
    while (slots_[i].id != npos)
      i = (i + 1) & mask_;
    slots_[i] = s;
  }
}

} // namespace abg::import
