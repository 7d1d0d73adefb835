#include "abg/storage/entity_names_view.h"

#include <cstring>

#include "runtime/storage/names_file.h"

namespace abg::storage {

expected<entity_names_view> entity_names_view::open(const std::filesystem::path& entity_path,
                                                    const entity_store_meta& meta, std::string_view type,
                                                    std::int64_t partition) {
  auto info = meta.type(type);
  if (!info)
    return fail("entity type '{}' is not in entity path {}", type, entity_path.string());
  if (partition < 0 || partition >= info->num_partitions())
    return fail("entity type '{}' has {} partitions, no partition {}", type, info->num_partitions(), partition);
  auto file = entity_names_file(entity_path, type, partition);
  auto mapped = mapped_file::open(file, map_access::sequential);
  if (!mapped)
    return std::unexpected(mapped.error());
  auto bad = [&](std::string_view what) {
    return fail("entity names file {} is {}; restore it or re-import into a new entity path", file.string(), what);
  };
  auto data = mapped->bytes();
  detail::names_header h;
  if (data.size() < sizeof h)
    return bad("truncated (shorter than its header)");
  std::memcpy(&h, data.data(), sizeof h);
  if (std::memcmp(h.magic, detail::names_magic, 8) != 0)
    return bad("not an abg names file (bad magic)");
  if (h.format_version != entity_store_format_version)
    return fail("entity names file {} has format version {}, this abg reads version {}", file.string(),
                h.format_version, entity_store_format_version);
  if (h.header_checksum != detail::names_header_sum(h))
    return bad("corrupt (header checksum mismatch)");
  if (std::memcmp(h.dataset, meta.id.bytes.data(), 16) != 0) {
    dataset_id other;
    std::memcpy(other.bytes.data(), h.dataset, 16);
    return fail("entity names file {} belongs to dataset {}, but {} is dataset {}", file.string(), other.hex(),
                entity_path.string(), meta.id.hex());
  }
  auto payload = data.subspan(sizeof h);
  if (h.count > payload.size() / 8 || (h.count + 1) * 8 > payload.size())
    return bad("truncated (offsets cut short)");
  if (checksum(payload) != h.payload_checksum)
    return bad("corrupt (checksum mismatch)");
  auto wanted = static_cast<std::uint64_t>(info->counts[static_cast<std::size_t>(partition)]);
  // An import writes names files before entities.json, its commit point; names
  // only ever get appended, so a file longer than the committed count is a
  // later import's unfinished work and its prefix is the committed dictionary.
  if (h.count < wanted)
    return bad(fmt::format("truncated: {} names, entities.json records {}", h.count, wanted));
  entity_names_view v;
  // The header is 64 bytes and mappings are page-aligned: the offsets are 8-byte aligned.
  v.offsets_ = reinterpret_cast<const std::uint64_t*>(payload.data());
  v.bytes_ = reinterpret_cast<const char*>(payload.data()) + (h.count + 1) * 8;
  const auto byte_count = payload.size() - (h.count + 1) * 8;
  for (std::uint64_t i = 0; i < wanted; ++i)
    if (v.offsets_[i] > v.offsets_[i + 1] || v.offsets_[i + 1] > byte_count)
      return bad("corrupt (offsets out of range)");
  v.count_ = static_cast<std::int64_t>(wanted);
  v.file_ = std::move(*mapped);
  return v;
}

std::int64_t entity_names_view::find(std::string_view name) const {
  const auto n = name.size();
  for (std::int64_t i = 0; i < count_; ++i)
    if (offsets_[i + 1] - offsets_[i] == n && std::memcmp(bytes_ + offsets_[i], name.data(), n) == 0)
      return i;
  return -1;
}

} // namespace abg::storage
