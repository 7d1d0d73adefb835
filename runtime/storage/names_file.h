// The entity names file's header (entity_store.cpp writes it,
// entity_names_view.cpp reads it). Layout in docs/formats.md.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "abg/storage/files.h"

namespace abg::storage::detail {

inline constexpr char names_magic[8] = {'A', 'B', 'G', 'N', 'A', 'M', 'E', 'S'};

// Names file: this header, then (count + 1) uint64 offsets, then the name bytes.
struct names_header {
  char magic[8];
  std::uint32_t format_version;
  std::uint32_t reserved;
  std::uint8_t dataset[16];
  std::uint64_t count;
  std::uint64_t payload_checksum; // offsets and bytes
  std::uint64_t header_checksum;  // of the 48 bytes before it
  std::uint64_t padding;
};
static_assert(sizeof(names_header) == 64);
static_assert(std::endian::native == std::endian::little, "abg files are little-endian");

inline std::uint64_t names_header_sum(const names_header& h) {
  return checksum(std::string_view(reinterpret_cast<const char*>(&h), offsetof(names_header, header_checksum)));
}

} // namespace abg::storage::detail
