// The edges a trainer trains: chunk `chunk` of a bucket's file of one edge
// path, read from this node's own copy of the imported data and checked
// against its manifest, as the kernel's tensors.
#pragma once

#include <cstdint>

#include "abg/error.h"
#include "abg/model/kernel.h"
#include "runtime/train/plan.h"

namespace abg::train {

expected<bucket_edges> load_edges(const plan& p, std::int64_t edge_path, schedule::bucket b, std::int64_t chunk);

} // namespace abg::train
