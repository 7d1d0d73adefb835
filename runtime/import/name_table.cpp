#include "runtime/import/name_table.h"

#include <xxhash.h>

namespace abg::import {

namespace {
constexpr std::size_t block_size = 1 << 20;
}

name_table::name_table() : slots_(1024), mask_(1023) {}

std::uint64_t name_table::hash(std::string_view name) {
  return XXH3_64bits(name.data(), name.size());
}

const char* name_table::store(std::string_view name) {
  auto need = sizeof(std::uint32_t) + name.size();
  if (need > block_left_) {
    auto size = std::max(block_size, need);
    blocks_.push_back(std::make_unique<char[]>(size));
    block_pos_ = blocks_.back().get();
    block_left_ = size;
  }
  auto* p = block_pos_;
  auto size = static_cast<std::uint32_t>(name.size());
  std::memcpy(p, &size, sizeof size);
  if (!name.empty())
    std::memcpy(p + sizeof size, name.data(), name.size());
  block_pos_ += need;
  block_left_ -= need;
  return p;
}

std::uint32_t name_table::find(std::string_view name) const {
  auto h = hash(name);
  auto tag = static_cast<std::uint32_t>(h);
  for (auto i = tag & mask_;; i = (i + 1) & mask_) {
    const auto& s = slots_[i];
    if (s.id == npos)
      return npos;
    if (s.tag == tag && unpack(s.name) == name)
      return s.id;
  }
}

std::uint32_t name_table::intern(std::string_view name, std::uint64_t h) {
  auto tag = static_cast<std::uint32_t>(h);
  for (auto i = tag & mask_;; i = (i + 1) & mask_) {
    auto& s = slots_[i];
    if (s.id == npos) {
      auto id = static_cast<std::uint32_t>(entries_.size());
      auto* stored = store(name);
      entries_.push_back(stored);
      s = {stored, id, tag};
      if (entries_.size() * 2 > slots_.size())
        grow();
      return id;
    }
    if (s.tag == tag && unpack(s.name) == name)
      return s.id;
  }
}

void name_table::grow() {
  std::vector<slot> old(slots_.size() * 2);
  old.swap(slots_);
  mask_ = slots_.size() - 1;
  for (auto& s : old) {
    if (s.id == npos)
      continue;
    auto i = s.tag & mask_; // the tag is the hash's low half, all the index needs
    while (slots_[i].id != npos)
      i = (i + 1) & mask_;
    slots_[i] = s;
  }
}

} // namespace abg::import
