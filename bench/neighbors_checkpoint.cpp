// Writes a synthetic entity path and committed checkpoint for
// bench/neighbors_bench.sh: ENTITIES entities "entity_0" ... of one type
// "node" (PARTITIONS partitions), random embeddings of dimension DIM, and one
// relation per operator (none, diagonal, translation, linear, affine,
// complex_diagonal; named after it) with random parameters, through the
// storage APIs a training run uses (entities.json, names files, a checkpoint
// version with optimizer state). No import and no training: a million
// entities take seconds.
//
//   build/neighbors_checkpoint [--work DIR] [--entities N] [--dim D] [--partitions P] [--comparator C] [--bias]
#include <cmath>
#include <fstream>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "abg/config.h"
#include "abg/model/desc.h"
#include "abg/storage/checkpoint.h"
#include "abg/storage/entity_store.h"

namespace fs = std::filesystem;
using namespace abg;

namespace {

// Fast normal-ish values (sum of uniforms): the benchmark needs realistic
// magnitudes, not a perfect distribution.
struct noise {
  std::uint64_t state;
  float next() {
    float s = 0;
    for (int i = 0; i < 4; ++i) {
      state ^= state << 13;
      state ^= state >> 7;
      state ^= state << 17;
      s += static_cast<float>(state >> 40) * (1.0f / 16777216.0f);
    }
    return (s - 2.0f) * 1.7320508f; // variance 1
  }
  std::vector<float> fill(std::size_t n, float scale, float offset = 0) {
    std::vector<float> v(n);
    for (auto& x : v)
      x = offset + scale * next();
    return v;
  }
};

int fail_with(const error& e) {
  fmt::print(stderr, "neighbors_checkpoint: {}\n", e.message);
  return 1;
}

} // namespace

int main(int argc, char** argv) {
  CLI::App app{"Synthetic entity path and checkpoint for bench/neighbors_bench.sh"};
  fs::path work = "/tmp/abg-neighbors-bench";
  std::int64_t entities = 1'000'000, dim = 100, partitions = 1;
  std::string comparator = "cos";
  bool bias = false;
  app.add_option("--work", work, "Output directory (config, data/, model/)")->capture_default_str();
  app.add_option("--entities", entities, "Entities")->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--dim", dim, "Dimension (even)")->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--partitions", partitions, "Partitions")->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--comparator", comparator, "Comparator")->capture_default_str();
  app.add_flag("--bias", bias, "bias = true (coordinate 0 is a bias)");
  CLI11_PARSE(app, argc, argv);

  const std::vector<std::string> ops{"none", "diagonal", "translation", "linear", "affine", "complex_diagonal"};
  std::string toml = fmt::format("entity_path = \"data\"\nedge_paths = [\"edges\"]\ncheckpoint_path = \"model\"\n"
                                 "dimension = {}\ncomparator = \"{}\"\nbias = {}\n[entities.node]\nnum_partitions = {}\n",
                                 dim, comparator, bias, partitions);
  for (auto& op : ops)
    toml += fmt::format("[[relations]]\nname = \"{}\"\nlhs = \"node\"\nrhs = \"node\"\noperator = \"{}\"\n", op, op);
  fs::remove_all(work / "data");
  fs::remove_all(work / "model");
  fs::create_directories(work / "data");
  {
    std::ofstream out(work / "neighbors.toml");
    out << toml;
  }
  auto cfg = parse_config(toml, "neighbors.toml");
  if (!cfg)
    return fail_with(cfg.error());

  // Entity path: entity i lives in partition i % P (as abg import spreads them), at offset i / P.
  storage::entity_store_meta meta;
  meta.id = storage::dataset_id::random();
  meta.relation_names = ops;
  storage::entity_type_info info{"node", {}};
  for (std::int64_t p = 0; p < partitions; ++p)
    info.counts.push_back(entities / partitions + (p < entities % partitions ? 1 : 0));
  meta.types.push_back(info);
  for (std::int64_t p = 0; p < partitions; ++p) {
    std::vector<std::string> names;
    for (std::int64_t i = p; i < entities; i += partitions)
      names.push_back(fmt::format("entity_{}", i));
    std::vector<std::string_view> views(names.begin(), names.end());
    if (auto ok = storage::write_entity_names(work / "data", meta.id, "node", p, views); !ok)
      return fail_with(ok.error());
  }
  if (auto ok = storage::write_entity_meta(work / "data", meta); !ok)
    return fail_with(ok.error());

  // Checkpoint version 1: tables, row-wise optimizer state, shared parameters with their state.
  auto writer = storage::checkpoint_writer::begin(work / "model", 1,
                                                  storage::checkpoint_settings::from(cfg->value, meta.id, toml));
  if (!writer)
    return fail_with(writer.error());
  noise rng{0x9E3779B97F4A7C15ull};
  for (std::int64_t p = 0; p < partitions; ++p) {
    const auto rows = info.counts[static_cast<std::size_t>(p)];
    auto table = rng.fill(static_cast<std::size_t>(rows * dim), 0.1f);
    if (auto ok = writer->put_embeddings("node", p, table, rows, dim); !ok)
      return fail_with(ok.error());
    std::vector<float> state(static_cast<std::size_t>(rows), 0.01f);
    if (auto ok = writer->put_optimizer("node", p, state); !ok)
      return fail_with(ok.error());
  }
  auto put = [&](const std::string& name, std::vector<std::int64_t> shape, const std::vector<float>& v) {
    if (auto ok = writer->put_shared(name, shape, v); !ok)
      return ok;
    return writer->put_shared(storage::optimizer_state_name(name), shape, std::vector<float>(v.size(), 0.01f));
  };
  if (auto ok = put(storage::global_embedding_name("node"), {dim}, rng.fill(static_cast<std::size_t>(dim), 0.05f));
      !ok)
    return fail_with(ok.error());
  for (std::size_t r = 0; r < ops.size(); ++r) {
    auto op = model::parse_operator(ops[r]);
    for (auto& [param, shape] : model::operator_params(*op, dim)) {
      std::vector<float> v;
      if (param == "linear_transformation") { // identity plus noise
        v = rng.fill(static_cast<std::size_t>(dim * dim), 0.3f / std::sqrt(static_cast<float>(dim)));
        for (std::int64_t i = 0; i < dim; ++i)
          v[static_cast<std::size_t>(i * dim + i)] += 1.0f;
      } else {
        v = rng.fill(static_cast<std::size_t>(shape[0]), 0.2f, param == "translation" || param == "imag" ? 0 : 1);
      }
      if (auto ok = put(storage::relation_param_name(static_cast<std::int64_t>(r), "rhs", param), shape, v); !ok)
        return fail_with(ok.error());
    }
  }
  auto committed = writer->commit({0, 0, 0, true});
  if (!committed)
    return fail_with(committed.error());
  fmt::print("{}: {} entities in {} partition(s), dimension {}, comparator {}{}, relations {}\n", work.string(),
             entities, partitions, dim, comparator, bias ? " with bias" : "", fmt::join(ops, ", "));
  return 0;
}
