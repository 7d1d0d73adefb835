// The names of one (entity type, partition) read in place from its memory-mapped
// names file: nothing is copied, so opening a partition of a million names
// costs one pass over the file (its checksum), and a name lookup one pass over
// the offsets. read_entity_names() copies them out of a view.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string_view>

#include "abg/error.h"
#include "abg/storage/entity_store.h"
#include "abg/storage/mapped_file.h"

namespace abg::storage {

class entity_names_view {
public:
  /// Maps and validates the names file of (type, partition) as read_entity_names() does:
  /// magic, version, header checksum, dataset id, payload checksum, the count
  /// entities.json records (a longer file's prefix) and every offset.
  static expected<entity_names_view> open(const std::filesystem::path& entity_path, const entity_store_meta& meta,
                                          std::string_view type, std::int64_t partition);

  /// Number of names (entities.json's count for the partition).
  std::int64_t size() const { return count_; }
  /// The name at offset i (0 <= i < size()).
  std::string_view operator[](std::int64_t i) const {
    return {bytes_ + offsets_[i], static_cast<std::size_t>(offsets_[i + 1] - offsets_[i])};
  }
  /// The offset of `name`, or -1. A scan of the offsets comparing lengths
  /// first, the bytes of equal-length names only (names files hold no index).
  std::int64_t find(std::string_view name) const;

private:
  mapped_file file_;
  const std::uint64_t* offsets_ = nullptr;
  const char* bytes_ = nullptr;
  std::int64_t count_ = 0;
};

} // namespace abg::storage
