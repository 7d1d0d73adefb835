#include "abg/storage/checkpoint_map.h"

#include <algorithm>

#include <fmt/ranges.h>

namespace abg::storage {

namespace {

std::string shape_of(std::span<const std::int64_t> shape) { return fmt::format("[{}]", fmt::join(shape, ", ")); }

// checkpoint_reader::read_into's checks, on the payload mapped instead of read.
expected<mapped_tensor> map_file(const checkpoint_reader& reader, const std::string& file,
                                 std::span<const std::int64_t> shape) {
  const auto& manifest = reader.manifest();
  auto path = reader.path_of(file);
  auto t = map_tensor_file(path, manifest.dataset);
  if (!t)
    return t;
  if (!std::equal(t->shape.begin(), t->shape.end(), shape.begin(), shape.end()))
    return fail("{}: shape {} does not match the manifest's {}: file is corrupt", path.string(), shape_of(t->shape),
                shape_of(shape));
  auto entry = manifest.file(file);
  if (!entry || entry->checksum != t->payload_checksum)
    return fail("{}: checksum differs from the manifest of version {}: file is corrupt or from another version",
                path.string(), manifest.version);
  return t;
}

} // namespace

expected<mapped_tensor> map_embeddings(const checkpoint_reader& reader, std::string_view type,
                                       std::int64_t partition) {
  auto* t = reader.manifest().table(type, partition);
  if (t == nullptr)
    return fail("checkpoint {} holds no embeddings for entity type '{}' partition {}", reader.directory().string(),
                type, partition);
  std::int64_t shape[] = {t->rows, t->dim};
  return map_file(reader, t->embeddings_file, shape);
}

expected<mapped_tensor> map_optimizer(const checkpoint_reader& reader, std::string_view type,
                                      std::int64_t partition) {
  auto* t = reader.manifest().table(type, partition);
  if (t == nullptr || t->optimizer_file.empty())
    return fail("checkpoint {} holds no optimizer state for entity type '{}' partition {}",
                reader.directory().string(), type, partition);
  std::vector<std::int64_t> shape{t->rows};
  if (t->state_width != 1)
    shape.push_back(t->dim);
  return map_file(reader, t->optimizer_file, shape);
}

const shared_tensors::entry* mapped_shared::find(std::string_view name) const {
  for (auto& e : entries)
    if (e.name == name)
      return &e;
  return nullptr;
}

expected<mapped_shared> map_shared(const checkpoint_reader& reader) {
  mapped_shared out;
  out.entries = reader.manifest().shared;
  std::uint64_t total = 0;
  for (auto& e : out.entries)
    total += e.size;
  for (auto& e : out.entries)
    if (e.offset > total || e.size > total - e.offset)
      return fail("checkpoint {}: shared tensor '{}' lies outside shared.abgt: the manifest is corrupt",
                  reader.directory().string(), e.name);
  std::int64_t shape[] = {static_cast<std::int64_t>(total)};
  auto all = map_file(reader, "shared.abgt", shape);
  if (!all)
    return std::unexpected(all.error());
  out.all = std::move(*all);
  return out;
}

} // namespace abg::storage
