// Checkpoints: checkpoint_path/v{N}/ holds one committed version of the model:
// its manifest over versioned table files (per-(type, partition) embeddings
// and row-wise Adagrad state in checkpoint_path/tables/, each named by the
// version that wrote it, so a version writes only the tables changed since
// the last one and refers to the others), the shared parameters and the
// effective config. manifest.json is written last and is the commit point: a
// version directory without a valid manifest does not exist for readers, so a
// crash while writing leaves the previous version in force. Layout and
// protocol in docs/formats.md.
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "abg/config.h"
#include "abg/error.h"
#include "abg/storage/files.h"
#include "abg/storage/tensor_file.h"

namespace abg::storage {

/// Written by this abg. Version 1 (every file inside its version directory)
/// is still read.
inline constexpr std::uint32_t checkpoint_format_version = 2;

/// A name as it appears inside file names: [A-Za-z0-9_.-] kept, every other
/// byte percent-encoded (%XX, upper-case hex).
std::string file_safe_name(std::string_view name);

// --- shared parameter names ------------------------------------------------------

/// "global_emb.{type}": the global embedding [dim] of an entity type.
std::string global_embedding_name(std::string_view type);
/// "relations.{relation id}.{side}.{param}", side "lhs" or "rhs", param as in
/// PBG ("diagonal", "translation", "linear_transformation", "real", "imag", ...).
std::string relation_param_name(std::int64_t relation, std::string_view side, std::string_view param);
/// "optim.{name}": the element-wise Adagrad state of shared tensor `name`.
std::string optimizer_state_name(std::string_view shared_name);

struct relation_param_key {
  std::int64_t relation = 0;
  std::string side;
  std::string param;
};
/// Inverse of relation_param_name(); nullopt for any other name.
std::optional<relation_param_key> parse_relation_param_name(std::string_view name);

/// Named float tensors kept together (they are small): relation operator
/// parameters, global embeddings and their optimizer state, in insertion order.
struct shared_tensors {
  struct entry {
    std::string name;
    std::vector<std::int64_t> shape;
    std::uint64_t offset = 0; // in floats, into data
    std::uint64_t size = 0;   // in floats
  };
  std::vector<entry> entries;
  std::vector<float> data;

  /// Appends a copy of `values`; refuses duplicate names and shape mismatches.
  expected<void> add(std::string_view name, std::vector<std::int64_t> shape, std::span<const float> values);
  const entry* find(std::string_view name) const;
  std::span<const float> values(const entry& e) const {
    return std::span<const float>(data).subspan(e.offset, e.size);
  }
};

// --- versions -------------------------------------------------------------------

/// Where training stood when a version was committed.
struct checkpoint_position {
  std::int64_t epoch = 0;      // 0-based
  std::int64_t edge_path = 0;  // index into edge_paths
  std::int64_t edge_chunk = 0; // 0-based
  bool epoch_complete = false; // this version ends its epoch
  /// A version committed mid-iteration (`abg console --admin`'s checkpoint
  /// and stop): the buckets (lhs, rhs) of this iteration already trained in
  /// it; a run resumed from it trains the others. Empty: the iteration is done.
  std::vector<std::array<std::int32_t, 2>> buckets_done;
  bool mid_iteration() const { return !buckets_done.empty(); }
  friend bool operator==(const checkpoint_position&, const checkpoint_position&) = default;
};

/// The part of a config that a checkpoint's tensors depend on: entity types
/// (partitions, dimension) and relations (name, sides, operator). Configs that
/// differ only in training settings or edge_paths have the same schema.
nlohmann::json checkpoint_schema(const config& c);

struct checkpoint_settings {
  dataset_id dataset;                                // the entity path's
  nlohmann::json schema = nlohmann::json::object(); // checkpoint_schema(config)
  std::string config_toml;                          // effective config, stored as config.toml
  std::int64_t keep_versions = 2;                   // newest committed versions kept (>= 1)
  std::optional<std::int64_t> preservation_interval; // epochs (PBG's checkpoint_preservation_interval)

  static checkpoint_settings from(const config& c, const dataset_id& dataset, std::string config_toml);
};

/// One file of a version as its manifest lists it: a plain name inside the
/// version directory, or "tables/NAME" inside the checkpoint path (a table
/// file, possibly written by an earlier version). The checksum is XXH3-64 of
/// the payload for tensor files (the header's own payload checksum), of the
/// whole file otherwise.
struct checkpoint_file {
  std::string name;
  std::uint64_t bytes = 0;
  std::uint64_t checksum = 0;
  /// checkpoint_mode = "local": the nodes whose own checkpoint path holds the
  /// file (a partition server's node, and its replica's); empty: this one.
  std::vector<std::string> nodes;
};

/// The embedding table of one (entity type, partition).
struct checkpoint_table {
  std::string type;
  std::int64_t partition = 0;
  std::int64_t rows = 0;
  std::int64_t dim = 0;
  std::string embeddings_file;
  std::string optimizer_file; // empty: no optimizer state stored
  /// Optimizer state values per row: 1 (row-wise Adagrad, [rows]) or dim
  /// (element-wise, [rows, dim]). Manifests before it have 1.
  std::int64_t state_width = 1;
};

struct checkpoint_manifest {
  std::int64_t version = 0;
  dataset_id dataset;
  checkpoint_position position;
  bool preserved = false; // kept regardless of keep_versions
  nlohmann::json schema = nlohmann::json::object();
  nlohmann::json stats = nlohmann::json::object();
  std::vector<checkpoint_table> tables;
  std::vector<shared_tensors::entry> shared; // index into shared.abgt
  std::vector<checkpoint_file> files;

  const checkpoint_table* table(std::string_view type, std::int64_t partition) const;
  const checkpoint_file* file(std::string_view name) const;
};

/// checkpoint_path/v{version}
std::filesystem::path checkpoint_version_dir(const std::filesystem::path& checkpoint_path, std::int64_t version);
/// checkpoint_path/tables: the table files of every version.
std::filesystem::path checkpoint_tables_dir(const std::filesystem::path& checkpoint_path);
/// "tables/{kind}_{type}_{partition}.v{version}.abgt", kind "embeddings" or
/// "optimizer": the name of a table file that version `version` writes.
std::string checkpoint_table_file(std::string_view kind, std::string_view type, std::int64_t partition,
                                  std::int64_t version);

/// The table files ("tables/NAME") that the committed versions of
/// checkpoint_path list; an error when a manifest cannot be read (then
/// nothing may be pruned: it might list anything).
expected<std::set<std::string>> listed_table_files(const std::filesystem::path& checkpoint_path);
/// Removes the files of checkpoint_path/tables that `keep` does not name.
void prune_table_files(const std::filesystem::path& checkpoint_path, const std::set<std::string>& keep);

/// Versions under checkpoint_path that have a manifest.json, ascending. The
/// manifests are not validated here (checkpoint_reader does that).
std::vector<std::int64_t> committed_checkpoint_versions(const std::filesystem::path& checkpoint_path);

/// Reads and validates version_dir/manifest.json (format, version, its own checksum).
expected<checkpoint_manifest> read_checkpoint_manifest(const std::filesystem::path& version_dir);

/// Writes one version. Not thread-safe; the caller holds the checkpoint
/// directory's lock. Every put_* refuses NaN/Inf, and once one has, commit() does too.
class checkpoint_writer {
public:
  /// Starts version `version` (>= 1): refuses one already committed, removes
  /// an uncommitted leftover of the same number (a crashed writer's).
  static expected<checkpoint_writer> begin(std::filesystem::path checkpoint_path, std::int64_t version,
                                           checkpoint_settings settings);

  /// A [rows, dim] table in C order.
  expected<void> put_embeddings(std::string_view type, std::int64_t partition, std::span<const float> data,
                                std::int64_t rows, std::int64_t dim);
  /// Optimizer state of a table already put: row-wise Adagrad's [rows] or
  /// element-wise Adagrad's [rows, dim] (by its size).
  expected<void> put_optimizer(std::string_view type, std::int64_t partition, std::span<const float> state);
  /// The table (embeddings and optimizer state) as `previous`, a committed
  /// version of this checkpoint path, holds it, without writing it again.
  /// False when it cannot be kept so (a format 1 version, another dataset, no
  /// such table, a file gone or of another size): put it instead.
  expected<bool> keep_table(const checkpoint_manifest& previous, std::string_view type, std::int64_t partition);
  /// A table whose files partition servers wrote themselves: into their
  /// nodes' own checkpoint paths (checkpoint_mode = "local"), listed with
  /// those nodes, or into this one (no nodes), as a server in this process
  /// does.
  expected<void> put_server_table(const checkpoint_table& table, const checkpoint_file& embeddings,
                                  const checkpoint_file& optimizer);
  /// A table written in pieces, rows in order, so that it is never in memory
  /// whole (a partition streamed from another node): begin_table(), then
  /// append_table() with its embeddings and after them its optimizer state,
  /// then put_table(), which lists it. A stream dropped unfinished leaves
  /// nothing behind.
  class table_stream {
  public:
    table_stream(table_stream&&) = default;
    table_stream& operator=(table_stream&&) = default;

  private:
    friend class checkpoint_writer;
    table_stream(checkpoint_table table, tensor_file_writer embeddings, tensor_file_writer state)
      : table_(std::move(table)), embeddings_(std::move(embeddings)), state_(std::move(state)) {}
    checkpoint_table table_;
    tensor_file_writer embeddings_, state_;
    std::uint64_t written_ = 0; // values appended, embeddings then state
  };
  /// Starts a [rows, dim] table with `state_width` (1 or dim) optimizer values per row.
  expected<table_stream> begin_table(std::string_view type, std::int64_t partition, std::int64_t rows,
                                     std::int64_t dim, std::int64_t state_width);
  /// The next values: embeddings in C order until all rows x dim are there, then the optimizer state.
  expected<void> append_table(table_stream& t, std::span<const float> values);
  /// Lists a table whose every value was appended.
  expected<void> put_table(table_stream t);
  /// A shared tensor (see the naming helpers above); copied, written at commit.
  expected<void> put_shared(std::string_view name, std::vector<std::int64_t> shape, std::span<const float> values);

  /// Writes shared.abgt and config.toml, fsyncs everything, writes the
  /// manifest (the commit point), then prunes old versions (failures to
  /// prune are logged, not returned: the version is committed by then).
  expected<checkpoint_manifest> commit(const checkpoint_position& position,
                                       nlohmann::json stats = nlohmann::json::object());

  std::int64_t version() const { return manifest_.version; }
  const std::filesystem::path& directory() const { return dir_; }

private:
  checkpoint_writer() = default;
  /// `values` start at element `offset` of what they belong to (rows of `dim`, or a flat tensor for 0).
  expected<void> refuse_non_finite(std::string_view what, std::span<const float> values, std::int64_t dim,
                                   std::uint64_t offset = 0);
  expected<void> usable() const;
  /// Writes a table file (tables/{kind}_{type}_{partition}.v{N}.abgt) and lists it.
  expected<std::string> put_table_file(std::string_view kind, std::string_view type, std::int64_t partition,
                                       std::span<const std::int64_t> shape, std::span<const float> values);
  std::filesystem::path root_, dir_;
  checkpoint_settings settings_;
  checkpoint_manifest manifest_;
  shared_tensors shared_;
  std::string poisoned_; // why commit() must refuse
  bool committed_ = false;
};

/// Reads one committed version, validating every byte against its manifest.
class checkpoint_reader {
public:
  /// Opens `version`, or the newest committed one (skipping, with a warning,
  /// versions whose manifest is corrupt). Checks the dataset id and that every
  /// listed file is present with its recorded size (a file that other nodes
  /// hold, checkpoint_mode = "local", only when it is here too; reading one
  /// that is not names the nodes that have it).
  static expected<checkpoint_reader> open(std::filesystem::path checkpoint_path, const dataset_id& expected_dataset,
                                          std::optional<std::int64_t> version = std::nullopt);

  /// Fails, naming the differences, when `schema` (checkpoint_schema of the
  /// current config) does not match the one this version was trained with.
  expected<void> check_schema(const nlohmann::json& schema) const;

  std::int64_t version() const { return manifest_.version; }
  const checkpoint_manifest& manifest() const { return manifest_; }
  const std::filesystem::path& directory() const { return dir_; }

  expected<tensor> embeddings(std::string_view type, std::int64_t partition) const;
  expected<void> embeddings_into(std::string_view type, std::int64_t partition, std::span<float> out) const;
  /// Fails when the version holds no optimizer state for the table.
  expected<tensor> optimizer(std::string_view type, std::int64_t partition) const;
  expected<void> optimizer_into(std::string_view type, std::int64_t partition, std::span<float> out) const;
  expected<shared_tensors> shared() const;
  expected<std::string> config_toml() const;
  /// Where a file the manifest lists lies.
  std::filesystem::path path_of(std::string_view file) const;

private:
  checkpoint_reader() = default;
  expected<const checkpoint_table*> table(std::string_view type, std::int64_t partition) const;
  expected<void> read_into(const std::string& file, std::span<const std::int64_t> shape, std::span<float> out) const;
  std::filesystem::path dir_;
  checkpoint_manifest manifest_;
};

} // namespace abg::storage
