// The importer's first pass turns each input line into a fixed-size record of
// provisional ids and parks it here, on disk, so the second pass never parses
// or hashes again and memory stays independent of the number of edges.
#pragma once

#include <cstdint>
#include <filesystem>
#include <vector>

#include "abg/error.h"

namespace abg::import {

struct spill_record {
  std::uint32_t lhs, rhs, rel; // provisional ids from the name tables
  float weight;
};

class spill_file {
public:
  /// An anonymous file in `dir` (unlinked at once, so it never outlives the process).
  static expected<spill_file> create(const std::filesystem::path& dir);
  spill_file(spill_file&&) noexcept;
  spill_file& operator=(spill_file&&) = delete;
  ~spill_file();

  expected<void> push(const spill_record& r) {
    if (buffer_.size() == buffer_.capacity())
      if (auto ok = flush(); !ok)
        return ok;
    buffer_.push_back(r);
    return {};
  }
  expected<void> finish() { return flush(); }
  std::uint64_t size() const { return count_; }

  /// Calls f(record) for every record in order; may be called several times.
  template <class F>
  expected<void> for_each(F&& f) const {
    std::vector<spill_record> chunk(1 << 16);
    for (std::uint64_t done = 0; done < count_;) {
      auto n = std::min<std::uint64_t>(chunk.size(), count_ - done);
      if (auto ok = read_at(chunk.data(), n, done); !ok)
        return ok;
      for (std::uint64_t i = 0; i < n; ++i)
        f(chunk[i]);
      done += n;
    }
    return {};
  }

private:
  spill_file() = default;
  expected<void> flush();
  expected<void> read_at(spill_record* out, std::uint64_t n, std::uint64_t first) const;

  int fd_ = -1;
  std::filesystem::path dir_;
  std::vector<spill_record> buffer_;
  std::uint64_t count_ = 0;
};

} // namespace abg::import
