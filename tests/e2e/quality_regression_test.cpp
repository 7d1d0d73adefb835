// The quality the shipped SOTA recipe adds over PBG's: config/fb15k237-sota.toml
// (1-vs-all, reciprocal relations, kbc's N3) against config/fb15k237.toml
// (PBG's FB15k recipe: 1000 uniform negatives, PBG's N3), both at the same
// reduced size on CoDEx-S (2,034 entities, 32,888 training edges), filtered
// test MRR through the CLI, about 17 s in all. Measured at this size: PBG's
// recipe 0.327, the SOTA recipe 0.361 (seeds 1 and 2 by hand: 0.330 / 0.329
// against 0.370 / 0.367); the test asks for 0.02.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/e2e/cli.h"
#include "tests/test_util.h"

namespace {

// Both configs as shipped, their size brought to a few seconds each and the
// same for both: dimension, epochs, batch, seed. Training reads the train
// split only; import and filtered evaluation know all three.
std::vector<std::string> with_overrides(std::vector<std::string> args,
                                        const char* edge_paths = "edge_paths=data/cdx/train,data/cdx/valid,data/cdx/test") {
  for (const char* p : {"entity_path=data/cdx", edge_paths, "checkpoint_path=model/cdx", "dimension=64",
                        "num_epochs=20", "batch_size=500", "seed=3"}) {
    args.emplace_back("-p");
    args.emplace_back(p);
  }
  return args;
}

double trained_filtered_mrr(const std::filesystem::path& dir, const std::string& config) {
  std::filesystem::remove_all(dir / "model");
  auto trained = abg::test::run_abg(with_overrides({"train", config}, "edge_paths=data/cdx/train"), dir);
  INFO(trained.err);
  REQUIRE(trained.exit_code == 0);
  auto args = with_overrides({"eval", config});
  for (const char* a : {"--edge-path", "data/cdx/test", "--filtered", "--json"}) args.emplace_back(a);
  auto r = abg::test::run_abg(args, dir);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const auto doc = nlohmann::json::parse(r.out);
  CHECK(doc["count"] == 1828);
  return doc["mrr"].get<double>();
}

} // namespace

TEST_CASE("quality: the SOTA recipe beats PBG's recipe on CoDEx-S by at least 0.02 filtered MRR") {
  const auto data = abg::test::shared_dataset("CoDEx-S");
  REQUIRE_MESSAGE(std::filesystem::exists(data / "train.tsv"), "needs ../shared/data/CoDEx-S");
  abg::test::scratch_dir dir;
  const std::string pbg = std::string(ABG_SOURCE_DIR) + "/config/fb15k237.toml";
  const std::string sota = std::string(ABG_SOURCE_DIR) + "/config/fb15k237-sota.toml";
  auto imported = abg::test::run_abg(with_overrides({"import", pbg, (data / "train.tsv").string(),
                                                     (data / "valid.tsv").string(), (data / "test.tsv").string(),
                                                     "--lhs-col", "0", "--rel-col", "1", "--rhs-col", "2"}),
                                     dir.path());
  INFO(imported.err);
  REQUIRE(imported.exit_code == 0);

  const double pbg_mrr = trained_filtered_mrr(dir.path(), pbg);
  const double sota_mrr = trained_filtered_mrr(dir.path(), sota);
  CAPTURE(pbg_mrr);
  CAPTURE(sota_mrr);
  CHECK(pbg_mrr > 0.25); // PBG's recipe itself learns (chance is about 0.003)
  CHECK(sota_mrr >= pbg_mrr + 0.02);
}
