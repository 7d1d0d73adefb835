// Kinship in 4 partitions trained by clusters of `abg node` processes on
// loopback (tests/e2e/cluster.h): the config, the imported data in a scratch
// folder, and helpers to run every node of a cluster file.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <doctest/doctest.h>
#include <fmt/format.h>

#include "tests/e2e/cluster.h"
#include "tests/e2e/kinship.h"

namespace abg::test {

// Kinship in 4 partitions: 16 buckets per epoch; one worker per node.
inline std::string kinship4(int epochs) {
  std::string c = kinship_config;
  c.replace(c.find("num_partitions = 1"), 18, "num_partitions = 4");
  c.replace(c.find("num_epochs = 8"), 14, fmt::format("num_epochs = {}", epochs));
  c.replace(c.find("workers = 2"), 11, "workers = 1\nhogwild_delay = 0");
  return c;
}

struct kinship_cluster {
  scratch_dir dir;
  explicit kinship_cluster(int epochs) { import_kinship(dir.path(), kinship4(epochs)); }
  double mrr(const std::string& model) {
    return kinship_filtered_mrr(dir.path(), {"-p", "checkpoint_path=" + model});
  }
  // Every node of `nodes` from `cluster` with the same overrides; waits for all.
  std::vector<int> run_all(const std::string& cluster, const std::vector<test_node>& nodes,
                           const std::vector<std::string>& overrides) {
    std::vector<std::unique_ptr<node_process>> ps;
    for (auto& n : nodes) ps.push_back(std::make_unique<node_process>(dir.path(), cluster, "kin.toml", n.name, overrides));
    std::vector<int> codes;
    for (auto& p : ps) {
      codes.push_back(p->exit_code());
      if (codes.back() != 0) MESSAGE(p->log());
    }
    return codes;
  }
};

inline const std::vector<std::string> train_split{"edge_paths=data/kin/train"};

inline std::vector<std::string> with(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

} // namespace abg::test
