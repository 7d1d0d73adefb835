// The graph of the actor tests that train through run_simulation: 4000
// edges among 400 entities of one type, "node", in 4 partitions, one
// relation, imported once into a scratch folder. Each test's configs differ
// in their extra keys and their checkpoint folder.
#pragma once

#include <doctest/doctest.h>

#include <string>
#include <string_view>

#include <fmt/format.h>

#include "abg/config.h"
#include "abg/import.h"
#include "tests/test_util.h"

namespace abg::test {

struct node_graph {
  scratch_dir dir;

  /// Dimension 8, 2 epochs, one worker, seed 3, no held-out edges, and
  /// `extra` (TOML keys), checkpoints in the folder `model`.
  std::string toml(std::string_view model, std::string_view extra) const {
    return fmt::format(R"(entity_path = "{0}/ent"
edge_paths = ["{0}/edges"]
checkpoint_path = "{0}/{1}"
dimension = 8
num_epochs = 2
eval_fraction = 0
workers = 1
seed = 3
{2}
[entities.node]
num_partitions = 4
[[relations]]
name = "r"
lhs = "node"
rhs = "node"
)",
                       dir.path().string(), model, extra);
  }

  config load(std::string_view model, std::string_view extra) const {
    auto c = parse_config(toml(model, extra), "test.toml");
    REQUIRE_MESSAGE(c, (c ? "" : c.error().message));
    return c->value;
  }

  node_graph() {
    std::string text;
    for (int i = 0; i < 4000; ++i) text += fmt::format("n{}\tn{}\n", i % 400, (i * 7 + 1) % 400);
    write_text(dir / "edges.tsv", text);
    import_options o;
    o.inputs = {dir / "edges.tsv"};
    o.lhs_col = 0;
    o.rhs_col = 1;
    auto imported = run_import(load("model", ""), o);
    REQUIRE_MESSAGE(imported, (imported ? "" : imported.error().message));
  }
};

} // namespace abg::test
