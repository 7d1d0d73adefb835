// A checkpoint version's tensors memory-mapped instead of copied into buffers:
// a reader that needs a few tables of a large checkpoint once (abg neighbors)
// maps those and nothing else, and its pages come straight from the page
// cache. Every byte is validated as checkpoint_reader's reads validate it.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "abg/error.h"
#include "abg/storage/checkpoint.h"
#include "abg/storage/tensor_file.h"

namespace abg::storage {

/// The embeddings [rows, dim] of (type, partition) in `reader`'s version,
/// validated as checkpoint_reader::embeddings() does: header, dataset, shape
/// and payload checksum against the manifest, then the payload's checksum.
expected<mapped_tensor> map_embeddings(const checkpoint_reader& reader, std::string_view type,
                                       std::int64_t partition);

/// The optimizer state of (type, partition), [rows] or [rows, dim] as the
/// manifest says, validated as map_embeddings() is.
expected<mapped_tensor> map_optimizer(const checkpoint_reader& reader, std::string_view type,
                                      std::int64_t partition);

/// The shared tensors (global embeddings, relation parameters, their
/// optimizer state) of `reader`'s version, mapped and validated as
/// checkpoint_reader::shared() does.
struct mapped_shared {
  mapped_tensor all; // every entry back to back, [total]
  std::vector<shared_tensors::entry> entries;

  const shared_tensors::entry* find(std::string_view name) const;
  std::span<const float> values(const shared_tensors::entry& e) const { return all.values.subspan(e.offset, e.size); }
};
expected<mapped_shared> map_shared(const checkpoint_reader& reader);

} // namespace abg::storage
