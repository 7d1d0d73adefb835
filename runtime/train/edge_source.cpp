#include "runtime/train/edge_source.h"

#include <filesystem>

#include "abg/storage/bucket_file.h"

namespace abg::train {

expected<bucket_edges> load_edges(const plan& p, std::int64_t path, schedule::bucket b, std::int64_t chunk) {
  namespace fs = std::filesystem;
  const auto& manifest = p.manifests[static_cast<std::size_t>(path)];
  bucket_edges edges;
  for (auto& mb : manifest.buckets) {
    if (mb.lhs != b.lhs || mb.rhs != b.rhs)
      continue;
    auto file = fs::path(p.cfg->edge_paths[static_cast<std::size_t>(path)]) / mb.file;
    auto reader = storage::bucket_reader::open(file, &p.meta.id);
    if (!reader)
      return std::unexpected(reader.error());
    if (reader->checksum() != mb.checksum || reader->size() != mb.edges)
      return fail("{} does not match its manifest; re-run `abg import`", file.string());
    auto n = static_cast<std::int64_t>(reader->size());
    auto begin = n * chunk / p.chunks, end = n * (chunk + 1) / p.chunks;
    auto k = end - begin;
    edges.lhs = torch::empty({k}, torch::kInt64);
    edges.rhs = torch::empty({k}, torch::kInt64);
    edges.rel = torch::empty({k}, torch::kInt64);
    auto* l = edges.lhs.data_ptr<std::int64_t>();
    auto* r = edges.rhs.data_ptr<std::int64_t>();
    auto* t = edges.rel.data_ptr<std::int64_t>();
    for (std::int64_t i = 0; i < k; ++i) {
      auto e = static_cast<std::uint64_t>(begin + i);
      l[i] = static_cast<std::int64_t>(reader->lhs(e));
      r[i] = static_cast<std::int64_t>(reader->rhs(e));
      t[i] = static_cast<std::int64_t>(reader->rel(e));
    }
    if (reader->layout().has_weights) {
      edges.weight = torch::empty({k}, torch::kFloat32);
      auto* w = edges.weight.data_ptr<float>();
      for (std::int64_t i = 0; i < k; ++i)
        w[i] = reader->weight(static_cast<std::uint64_t>(begin + i));
    }
  }
  if (!edges.lhs.defined()) // empty bucket: no file
    edges.lhs = edges.rhs = edges.rel = torch::empty({0}, torch::kInt64);
  return edges;
}

} // namespace abg::train
