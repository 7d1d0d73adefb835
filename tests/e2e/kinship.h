// The Kinship training config and set-up the end-to-end tests share (../shared/data/Kinship).
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "tests/e2e/cli.h"
#include "tests/test_util.h"

namespace abg::test {

inline constexpr const char* kinship_config = R"(entity_path = "data/kin"
edge_paths = ["data/kin/train", "data/kin/valid", "data/kin/test"]
checkpoint_path = "model/kin"
dimension = 64
dynamic_relations = true
global_emb = false
comparator = "dot"
loss_fn = "softmax"
lr = 0.1
regularization_coef = 1e-3
num_uniform_negs = 100
num_epochs = 8
eval_fraction = 0.0
workers = 2
seed = 7
[entities.all]
num_partitions = 1
[[relations]]
name = "all_edges"
lhs = "all"
rhs = "all"
operator = "complex_diagonal"
)";

/// ../shared/data/Kinship, or a failed REQUIRE when it is missing.
inline std::filesystem::path kinship_data() {
  auto data = shared_dataset("Kinship");
  REQUIRE_MESSAGE(std::filesystem::exists(data / "train.tsv"), "needs ../shared/data/Kinship");
  return data;
}

/// Writes `config` to DIR/kin.toml and imports Kinship's train, valid and test
/// splits into its three edge paths.
inline void import_kinship(const std::filesystem::path& dir, std::string_view config = kinship_config) {
  auto data = kinship_data();
  write_text(dir / "kin.toml", config);
  auto imported = run_abg({"import", "kin.toml", (data / "train.tsv").string(), (data / "valid.tsv").string(),
                           (data / "test.tsv").string(), "--lhs-col", "0", "--rel-col", "1", "--rhs-col", "2"},
                          dir);
  INFO(imported.err);
  REQUIRE(imported.exit_code == 0);
}

/// `abg eval kin.toml --filtered --json [extra...]`'s MRR on Kinship's test split
/// (1069 edges), checking the JSON has every metric.
inline double kinship_filtered_mrr(const std::filesystem::path& dir, const std::vector<std::string>& extra = {}) {
  std::vector<std::string> args{"eval", "kin.toml", "--filtered", "--json"};
  args.insert(args.end(), extra.begin(), extra.end());
  auto r = run_abg(args, dir);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  auto doc = nlohmann::json::parse(r.out); // exactly one JSON object on stdout
  for (auto key : {"mrr", "mean_rank", "hits@1", "hits@3", "hits@10", "hits@50", "auc", "count"})
    CHECK(doc.contains(key));
  CHECK(doc["count"] == 1069);
  return doc["mrr"].get<double>();
}

} // namespace abg::test
