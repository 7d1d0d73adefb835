// A committed checkpoint loaded for scoring (abg eval, score).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

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
  // (type, partition) -> [count, dim], mapped from the checkpoint's files (read-only)
  std::map<std::pair<std::string, std::int64_t>, torch::Tensor> tables;
  std::int64_t version = 0;

  /// Every partition of `type` back to back: row = global index (with
  /// several partitions, a copy in memory).
  torch::Tensor whole(const std::string& type) const;
  /// The rows of `type` at global indices `ids`, gathered from the mapped
  /// partitions they lie in (eval::gather_rows): memory for those rows only.
  torch::Tensor rows(const std::string& type, const torch::Tensor& ids) const;
  /// Relation id r's name: the entity path's (dynamic ones come from the data), else the config's.
  std::string relation_name(std::size_t r) const;
};

/// The names of every partition of `type` back to back, in whole()'s row order.
expected<std::vector<std::string>> entity_names(const config& cfg, const loaded_model& lm, const std::string& type);

/// The latest (or `version`) checkpoint of cfg.checkpoint_path, validated
/// against the config and its entity path.
expected<loaded_model> load_model(const config& cfg, std::optional<std::int64_t> version);

} // namespace abg::tools
