// A partition server's partitions on disk (buffer_capacity > 0, docs/config.md):
// the current version of each table (a partition of one entity type) as two
// tensor files, its embeddings and its optimizer state, in one
// directory. A put is written in pieces as its chunks arrive and replaces the
// table only once complete; a read maps the files after checking them, so
// the memory a stored table takes is the page cache's, which the kernel
// reclaims. Opening the store removes what an earlier run left, and nothing
// is fsynced as it is written: a checkpoint takes a version by hard-linking
// its files (link_into), which syncs them then, so committed partitions are
// the store's own files and the disk holds no second copy of them.
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "abg/error.h"
#include "abg/storage/tensor_file.h"

namespace abg::storage {

/// A table as the store names it: entity type and partition.
using table_key = std::pair<std::string, std::int32_t>;

struct stored_table {
  std::uint64_t version = 0;
  std::uint64_t rows = 0;
  std::int64_t dim = 0;
  std::int64_t state_width = 1; // optimizer state values per row: 1 or dim
};

/// A file of a table linked into a checkpoint: its size and payload checksum.
struct linked_file {
  std::uint64_t bytes = 0;
  std::uint64_t checksum = 0;
};

/// A stored table, mapped and verified: the spans live as long as this.
struct mapped_table {
  stored_table info;
  mapped_tensor embeddings; // [rows, dim]
  mapped_tensor state;      // [rows], or [rows, dim] for element-wise Adagrad
};

/// Where node `node`'s partition server keeps its store: a folder of the
/// checkpoint path, apart from the checkpoint's own files.
std::filesystem::path partition_store_dir(const std::filesystem::path& checkpoint_path, std::string_view node);

class partition_store {
public:
  /// Creates `dir` if needed and empties it of store files (an earlier run's).
  static expected<std::unique_ptr<partition_store>> open(std::filesystem::path dir, const dataset_id& dataset);

  /// A new version of one table being written: rows in order, each append
  /// `n` rows of embeddings (n * dim values) and their n * state_width
  /// optimizer values.
  class put {
  public:
    expected<void> append(std::span<const float> embeddings, std::span<const float> state);
    std::uint64_t rows_written() const { return rows_written_; }

  private:
    friend class partition_store;
    put(table_key key, stored_table info, std::uint64_t file_id, tensor_file_writer embeddings,
        tensor_file_writer state)
      : key_(std::move(key)), info_(info), file_id_(file_id), embeddings_(std::move(embeddings)),
        state_(std::move(state)) {}
    table_key key_;
    stored_table info_;
    std::uint64_t file_id_ = 0;
    std::uint64_t rows_written_ = 0;
    tensor_file_writer embeddings_;
    tensor_file_writer state_;
  };

  /// Starts writing `version` of a table of `rows` x `dim` with
  /// `state_width` (1 or dim) optimizer values per row; nothing stored
  /// changes until install().
  expected<put> begin(const table_key& key, std::uint64_t version, std::uint64_t rows, std::int64_t dim,
                      std::int64_t state_width = 1);
  /// Makes a complete put the table's current version (an incomplete one is
  /// refused and its files removed); the files of the
  /// version it replaces go (mappings of them stay readable until dropped).
  expected<void> install(put p);
  /// Writes a whole table at once (begin, one append, install).
  expected<void> store(const table_key& key, std::uint64_t version, std::uint64_t rows, std::int64_t dim,
                       std::span<const float> embeddings, std::span<const float> state, std::int64_t state_width = 1);

  /// The current version, mapped after its headers and checksums were checked.
  expected<mapped_table> read(const table_key& key) const;
  /// Hard-links the files of the table's current version, which must be
  /// `version`, as `embeddings` and `state` (replacing files of those names),
  /// and syncs them and their folder: a checkpoint's files that share the
  /// store's disk blocks. The store never changes a file it installed, and a
  /// later version only removes the store's own name of it. nullopt when the
  /// filesystem cannot link them there (another filesystem, or no hard
  /// links): the caller copies instead.
  expected<std::optional<std::array<linked_file, 2>>> link_into(const table_key& key, std::uint64_t version,
                                                                const std::filesystem::path& embeddings,
                                                                const std::filesystem::path& state) const;
  /// The other way: makes checkpoint files `embeddings` and `state` the
  /// table's current version `version` by hard-linking them into the store,
  /// once their headers, shapes and payload checksums (against `checksums`,
  /// a manifest's) are verified. False when the filesystem cannot link them
  /// here: the caller reads and stores them instead.
  expected<bool> adopt(const table_key& key, std::uint64_t version, const std::filesystem::path& embeddings,
                       const std::filesystem::path& state, std::array<std::uint64_t, 2> checksums);
  std::optional<stored_table> find(const table_key& key) const;
  std::map<table_key, stored_table> list() const;
  /// Removes every table.
  void clear();
  const std::filesystem::path& dir() const { return dir_; }

  partition_store(std::filesystem::path dir, const dataset_id& dataset) : dir_(std::move(dir)), dataset_(dataset) {}

private:
  struct entry {
    stored_table info;
    std::uint64_t file_id = 0; // of its two files' names
    std::array<std::uint64_t, 2> checksums{}; // payload checksums: embeddings, state
  };
  std::filesystem::path file_of(std::uint64_t file_id, bool embeddings) const;
  // Makes `e` the table's current version and removes the files of the one it replaces.
  void set_current(const table_key& key, const entry& e);

  std::filesystem::path dir_;
  dataset_id dataset_;
  mutable std::mutex mutex_; // guards tables_ and next_file_
  std::map<table_key, entry> tables_;
  std::uint64_t next_file_ = 0;
};

} // namespace abg::storage
