#include "tools/learn/loaded_model.h"

#include <iterator>
#include <vector>

#include "abg/eval/model_score.h"
#include "abg/storage/checkpoint.h"
#include "abg/storage/checkpoint_map.h"

namespace abg::tools {

torch::Tensor loaded_model::whole(const std::string& type) const {
  std::vector<torch::Tensor> parts;
  for (std::int64_t p = 0; p < meta.type(type)->num_partitions(); ++p)
    parts.push_back(tables.at({type, p}));
  return parts.size() == 1 ? parts.front() : torch::cat(parts, 0);
}

torch::Tensor loaded_model::rows(const std::string& type, const torch::Tensor& ids) const {
  std::vector<torch::Tensor> parts;
  for (std::int64_t p = 0; p < meta.type(type)->num_partitions(); ++p)
    parts.push_back(tables.at({type, p}));
  return eval::gather_rows(parts, ids);
}

std::string loaded_model::relation_name(std::size_t r) const {
  return r < meta.relation_names.size() ? meta.relation_names[r] : desc.relations.at(r).name;
}

expected<std::vector<std::string>> entity_names(const config& cfg, const loaded_model& lm, const std::string& type) {
  std::vector<std::string> out;
  for (std::int64_t p = 0; p < lm.meta.type(type)->num_partitions(); ++p) {
    auto n = storage::read_entity_names(cfg.entity_path, lm.meta, type, p);
    if (!n)
      return std::unexpected(n.error());
    out.insert(out.end(), std::make_move_iterator(n->begin()), std::make_move_iterator(n->end()));
  }
  return out;
}

expected<loaded_model> load_model(const config& cfg, std::optional<std::int64_t> version) {
  loaded_model lm;
  auto meta = storage::read_entity_meta(cfg.entity_path);
  if (!meta)
    return std::unexpected(meta.error());
  lm.meta = std::move(*meta);
  auto desc = model::model_desc::from(cfg, static_cast<std::int64_t>(lm.meta.relation_names.size()));
  if (!desc)
    return std::unexpected(desc.error());
  lm.desc = std::move(*desc);
  auto reader = storage::checkpoint_reader::open(cfg.checkpoint_path, lm.meta.id, version);
  if (!reader)
    return std::unexpected(reader.error());
  if (auto ok = reader->check_schema(storage::checkpoint_schema(cfg)); !ok)
    return fail("the checkpoint in {} does not match this config: {}", cfg.checkpoint_path, ok.error().message);
  lm.version = reader->version();
  lm.params = model::shared_params::init(lm.desc);
  auto shared = reader->shared();
  if (!shared)
    return std::unexpected(shared.error());
  if (auto ok = lm.params.load(*shared); !ok)
    return std::unexpected(ok.error());
  for (auto& type : lm.desc.entity_types) {
    auto* info = lm.meta.type(type);
    for (std::int64_t p = 0; p < info->num_partitions(); ++p) {
      // Mapped, not read: a checkpoint bigger than memory is scored from the
      // page cache, which the kernel can always take back.
      auto t = storage::map_embeddings(*reader, type, p);
      if (!t)
        return std::unexpected(t.error());
      auto rows = t->shape.at(0), dim = t->shape.at(1);
      if (rows != info->counts[static_cast<std::size_t>(p)])
        return fail("checkpoint version {} holds {} rows for {}/{}, the entity path {}; train again after an "
                    "import that added entities",
                    lm.version, rows, type, p, info->counts[static_cast<std::size_t>(p)]);
      auto mapping = std::make_shared<storage::mapped_tensor>(std::move(*t));
      // Read-only pages: nothing writes a loaded table (scoring makes new tensors).
      auto* data = const_cast<float*>(mapping->values.data());
      lm.tables[{type, p}] = torch::from_blob(data, {rows, dim}, [mapping](void*) {}, torch::kFloat32);
    }
  }
  return lm;
}

} // namespace abg::tools
