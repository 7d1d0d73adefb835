// Checks of a checkpoint directory the training tests share: only committed
// versions and no temporary files, every tensor of a version readable,
// training_stats.json one JSON object per line.
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "abg/storage/checkpoint.h"
#include "abg/storage/entity_store.h"

namespace abg::test {

/// The newest committed version under `checkpoint_path`, 0 when there is none.
inline std::int64_t newest_version(const std::filesystem::path& checkpoint_path) {
  auto versions = storage::committed_checkpoint_versions(checkpoint_path);
  return versions.empty() ? 0 : versions.back();
}

/// The newest version's table files (embeddings and optimizer state), each
/// by its name without the version, with its checksum: two runs that trained
/// the same model give the same map.
inline std::map<std::string, std::uint64_t> table_checksums(const std::filesystem::path& checkpoint_path) {
  auto m = storage::read_checkpoint_manifest(storage::checkpoint_version_dir(checkpoint_path, newest_version(checkpoint_path)));
  REQUIRE(m.has_value());
  std::map<std::string, std::uint64_t> out;
  for (const auto& f : m->files)
    if (f.name.starts_with("tables/")) out[f.name.substr(0, f.name.find(".v"))] = f.checksum;
  return out;
}

/// Every entry of `checkpoint_path` is training_stats.json, run.log, a
/// committed version v{N} (one holding manifest.json), the tables folder,
/// which holds only files that a committed version lists, or a partition
/// buffer's store, emptied (no file in it), and no temporary file
/// (`.NAME.tmp.PID`) is left anywhere below it.
inline void check_only_committed(const std::filesystem::path& checkpoint_path) {
  std::set<std::string> listed;
  for (auto v : storage::committed_checkpoint_versions(checkpoint_path)) {
    auto m = storage::read_checkpoint_manifest(storage::checkpoint_version_dir(checkpoint_path, v));
    REQUIRE(m.has_value());
    for (auto& f : m->files)
      listed.insert(f.name);
  }
  for (auto& e : std::filesystem::directory_iterator(checkpoint_path)) {
    auto name = e.path().filename().string();
    INFO("checkpoint entry ", name);
    if (name == "training_stats.json" || name == "run.log") // beside the versions
      continue;
    CHECK(e.is_directory());
    if (name == "tables") {
      for (auto& f : std::filesystem::directory_iterator(e.path()))
        CHECK_MESSAGE(listed.contains("tables/" + f.path().filename().string()), f.path().string());
      continue;
    }
    if (name == "partition-store") { // a partition buffer's scratch store (docs/actors.md), emptied by its server
      for (auto& f : std::filesystem::recursive_directory_iterator(e.path()))
        CHECK_MESSAGE(!f.is_regular_file(), f.path().string());
      continue;
    }
    CHECK(name.starts_with("v"));
    CHECK(std::filesystem::exists(e.path() / "manifest.json"));
  }
  for (auto& e : std::filesystem::recursive_directory_iterator(checkpoint_path))
    CHECK_MESSAGE(e.path().filename().string().find(".tmp.") == std::string::npos, e.path().string());
}

/// Opens the newest committed version through checkpoint_reader (dataset id,
/// file sizes) and reads every table's embeddings and optimizer state and the
/// shared tensors (header and payload checksums); each table has as many rows
/// as the entity path counts. Returns the version.
inline std::int64_t check_loadable(const std::filesystem::path& checkpoint_path,
                                   const std::filesystem::path& entity_path) {
  auto meta = storage::read_entity_meta(entity_path);
  REQUIRE(meta.has_value());
  auto reader = storage::checkpoint_reader::open(checkpoint_path, meta->id);
  REQUIRE_MESSAGE(reader.has_value(), (reader ? std::string() : reader.error().message));
  CHECK_FALSE(reader->manifest().tables.empty());
  for (auto& t : reader->manifest().tables) {
    INFO("table ", t.type, "/", t.partition);
    auto emb = reader->embeddings(t.type, t.partition);
    REQUIRE_MESSAGE(emb.has_value(), (emb ? std::string() : emb.error().message));
    CHECK(emb->shape == std::vector<std::int64_t>{t.rows, t.dim});
    REQUIRE(meta->type(t.type) != nullptr);
    CHECK(t.rows == static_cast<std::int64_t>(meta->type(t.type)->counts.at(static_cast<std::size_t>(t.partition))));
    auto state = reader->optimizer(t.type, t.partition);
    REQUIRE_MESSAGE(state.has_value(), (state ? std::string() : state.error().message));
    CHECK(state->shape == std::vector<std::int64_t>{t.rows});
  }
  auto shared = reader->shared();
  REQUIRE_MESSAGE(shared.has_value(), (shared ? std::string() : shared.error().message));
  CHECK_FALSE(shared->entries.empty());
  return reader->version();
}

/// checkpoint_path/training_stats.json, one parsed object per line (a torn
/// or malformed line fails the test).
inline std::vector<nlohmann::json> training_stats(const std::filesystem::path& checkpoint_path) {
  std::vector<nlohmann::json> lines;
  std::ifstream in(checkpoint_path / "training_stats.json");
  for (std::string line; std::getline(in, line);) {
    auto doc = nlohmann::json::parse(line, nullptr, false);
    CHECK_MESSAGE(doc.is_object(), line);
    lines.push_back(std::move(doc));
  }
  return lines;
}

} // namespace abg::test
