// Checkpoint averaging: the mean of the parameters of the last K end-of-epoch
// versions, committed as a new version (Polyak averaging of the iterates, as
// in stochastic weight averaging, Izmailov et al. 2018). Late in training
// each epoch's dropout and sampling move the embeddings around a point that
// their mean is nearer to; on WN18RR the mean of the last 24 epochs ranks
// better than any one of them (docs/model.md).
#pragma once

#include <cstdint>
#include <vector>

#include "abg/config.h"
#include "abg/error.h"

namespace abg::storage {

struct average_summary {
  std::int64_t version = 0;           // the version written
  std::vector<std::int64_t> averaged; // the versions averaged, ascending
  std::int64_t tables = 0;            // embedding tables written
  std::int64_t shared = 0;            // shared parameters averaged (relation operators, global embeddings)
};

/// Averages the newest `last` (>= 2) committed end-of-epoch training versions
/// of config.checkpoint_path into version newest + 1: entity embeddings,
/// relation parameters and global embeddings are the element-wise mean;
/// optimizer state and the training position are the newest version's, so a
/// run resumed from it trains on from the mean. Versions committed within an
/// epoch and earlier averages are passed over. Refuses, before writing
/// anything, when fewer such versions are kept (train with
/// checkpoint_keep_versions >= last), when the newest version is itself an
/// average, or when the config's schema or entity path does not match. Keeps
/// at least the averaged versions and the new one on disk.
expected<average_summary> average_checkpoints(const config& c, std::int64_t last);

} // namespace abg::storage
