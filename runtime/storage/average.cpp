#include "abg/storage/average.h"

#include <algorithm>
#include <string>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "abg/storage/checkpoint.h"
#include "abg/storage/entity_store.h"

namespace abg::storage {

namespace {

constexpr const char* averaged_key = "averaged_versions";

bool is_average(const checkpoint_manifest& m) {
  return m.stats.is_object() && m.stats.contains(averaged_key);
}

// Optimizer state is not a parameter: the new version keeps the newest's.
bool is_optimizer_state(std::string_view shared_name) {
  return shared_name.starts_with(optimizer_state_name(""));
}

// The newest `last` end-of-epoch training versions, newest first.
expected<std::vector<checkpoint_reader>> open_versions(const config& c, const dataset_id& dataset,
                                                       std::int64_t last) {
  auto versions = committed_checkpoint_versions(c.checkpoint_path);
  if (versions.empty())
    return fail("checkpoint path {} holds no committed version; train first", c.checkpoint_path);
  std::vector<checkpoint_reader> out;
  std::vector<std::int64_t> passed_over;
  const auto schema = checkpoint_schema(c);
  for (auto v = versions.rbegin(); v != versions.rend() && std::ssize(out) < last; ++v) {
    auto r = checkpoint_reader::open(c.checkpoint_path, dataset, *v);
    if (!r)
      return std::unexpected(r.error());
    if (auto ok = r->check_schema(schema); !ok)
      return std::unexpected(ok.error());
    const auto& m = r->manifest();
    if (v == versions.rbegin() && is_average(m))
      return fail("version {} of {} is already an average (of versions {}); train on from it before averaging "
                  "again, or evaluate it as it is",
                  *v, c.checkpoint_path, m.stats.at(averaged_key).dump());
    if (is_average(m) || !m.position.epoch_complete || m.position.mid_iteration()) {
      passed_over.push_back(*v);
      continue;
    }
    // The last K epochs, not K scattered ones (a version kept by
    // checkpoint_preservation_interval lies epochs before the others).
    if (!out.empty() && m.position.epoch != out.back().manifest().position.epoch - 1)
      return fail("version {} of {} ends epoch {}, but the next version kept after it, {}, ends epoch {}: the last {} "
                  "epochs are not all kept; train with checkpoint_keep_versions >= {}",
                  *v, c.checkpoint_path, m.position.epoch + 1, out.back().version(),
                  out.back().manifest().position.epoch + 1, last, last);
    out.push_back(std::move(*r));
  }
  if (std::ssize(out) < last)
    return fail("checkpoint path {} keeps {} end-of-epoch training version(s) ({} committed: {}; passed over: "
                "{}); averaging the last {} needs {}: train with checkpoint_keep_versions >= {}",
                c.checkpoint_path, out.size(), versions.size(), fmt::join(versions, ", "),
                passed_over.empty() ? std::string("none") : fmt::format("{}", fmt::join(passed_over, ", ")), last,
                last, last);
  return out;
}

} // namespace

expected<average_summary> average_checkpoints(const config& c, std::int64_t last) {
  if (last < 2)
    return fail("averaging needs at least 2 versions, got {}", last);
  auto meta = read_entity_meta(c.entity_path);
  if (!meta)
    return std::unexpected(meta.error());
  auto readers = open_versions(c, meta->id, last);
  if (!readers)
    return std::unexpected(readers.error());
  const auto& newest = readers->front();
  const auto scale = 1.0f / static_cast<float>(last);

  auto toml = newest.config_toml();
  if (!toml)
    return std::unexpected(toml.error());
  average_summary summary;
  summary.version = newest.version() + 1;
  for (auto& r : *readers)
    summary.averaged.push_back(r.version());
  std::ranges::reverse(summary.averaged);

  auto settings = checkpoint_settings::from(c, meta->id, std::move(*toml));
  // The versions averaged stay, so that another count can be tried.
  settings.keep_versions = std::max(settings.keep_versions, summary.version - summary.averaged.front() + 1);
  auto w = checkpoint_writer::begin(c.checkpoint_path, summary.version, std::move(settings));
  if (!w)
    return std::unexpected(w.error());

  // One table at a time: its sum and one version's rows are in memory, never more.
  std::vector<float> sum, rows;
  for (const auto& t : newest.manifest().tables) {
    const auto n = static_cast<std::size_t>(t.rows * t.dim);
    sum.assign(n, 0.0f);
    rows.resize(n);
    for (const auto& r : *readers) {
      if (auto ok = r.embeddings_into(t.type, t.partition, rows); !ok)
        return std::unexpected(ok.error());
      for (std::size_t i = 0; i < n; ++i)
        sum[i] += rows[i];
    }
    for (auto& x : sum)
      x *= scale;
    if (auto ok = w->put_embeddings(t.type, t.partition, sum, t.rows, t.dim); !ok)
      return std::unexpected(ok.error());
    if (!t.optimizer_file.empty()) {
      rows.resize(static_cast<std::size_t>(t.rows * t.state_width));
      if (auto ok = newest.optimizer_into(t.type, t.partition, rows); !ok)
        return std::unexpected(ok.error());
      if (auto ok = w->put_optimizer(t.type, t.partition, rows); !ok)
        return std::unexpected(ok.error());
    }
    ++summary.tables;
  }

  std::vector<shared_tensors> shared;
  for (const auto& r : *readers) {
    auto s = r.shared();
    if (!s)
      return std::unexpected(s.error());
    shared.push_back(std::move(*s));
  }
  for (const auto& e : shared.front().entries) {
    auto values = shared.front().values(e);
    std::vector<float> mean(values.begin(), values.end());
    if (!is_optimizer_state(e.name)) {
      for (std::size_t k = 1; k < shared.size(); ++k) {
        const auto* other = shared[k].find(e.name);
        if (other == nullptr || other->size != e.size)
          return fail("version {} of {} holds shared parameter '{}' {} where version {} holds {} values; these "
                      "versions cannot be averaged",
                      (*readers)[k].version(), c.checkpoint_path, e.name,
                      other == nullptr ? std::string("not at all") : fmt::format("with {} values", other->size),
                      newest.version(), e.size);
        auto v = shared[k].values(*other);
        for (std::size_t i = 0; i < mean.size(); ++i)
          mean[i] += v[i];
      }
      for (auto& x : mean)
        x *= scale;
      ++summary.shared;
    }
    if (auto ok = w->put_shared(e.name, e.shape, mean); !ok)
      return std::unexpected(ok.error());
  }

  auto stats = newest.manifest().stats.is_object() ? newest.manifest().stats : nlohmann::json::object();
  stats[averaged_key] = summary.averaged;
  if (auto ok = w->commit(newest.manifest().position, std::move(stats)); !ok)
    return std::unexpected(ok.error());
  return summary;
}

} // namespace abg::storage
