// A committed checkpoint loaded for scoring (abg eval, neighbors, score).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>

#include <torch/torch.h>

#include "abg/config.h"
#include "abg/error.h"
#include "abg/model/model.h"
#include "abg/storage/entity_store.h"

namespace abg::tools {

struct loaded_model {
  storage::entity_store_meta meta;
  model::model_desc desc;
  model::shared_params params;
  std::map<std::pair<std::string, std::int64_t>, torch::Tensor> tables; // (type, partition) -> [count, dim]
  std::int64_t version = 0;

  /// Every partition of `type` back to back: row = global index.
  torch::Tensor whole(const std::string& type) const;
};

/// The latest (or `version`) checkpoint of cfg.checkpoint_path, validated
/// against the config and its entity path.
expected<loaded_model> load_model(const config& cfg, std::optional<std::int64_t> version);

} // namespace abg::tools
