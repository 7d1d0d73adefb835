#include "abg/storage/export.h"

#include <algorithm>
#include <map>

#include "abg/storage/checkpoint.h"
#include "abg/storage/entity_store.h"
#include "abg/storage/tensor_file.h"

namespace abg::storage {

namespace fs = std::filesystem;

std::string escape_name(std::string_view name) {
  std::string out;
  out.reserve(name.size());
  for (char c : name) {
    switch (c) {
      case '\\': out += "\\\\"; break;
      case '\t': out += "\\t"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      default: out += c;
    }
  }
  return out;
}

std::string unescape_name(std::string_view escaped) {
  std::string out;
  out.reserve(escaped.size());
  for (std::size_t i = 0; i < escaped.size(); ++i) {
    char c = escaped[i];
    if (c != '\\' || i + 1 == escaped.size()) {
      out += c;
      continue;
    }
    switch (char next = escaped[++i]) {
      case '\\': out += '\\'; break;
      case 't': out += '\t'; break;
      case 'n': out += '\n'; break;
      case 'r': out += '\r'; break;
      default: out += '\\'; out += next;
    }
  }
  return out;
}

std::string npy_header(std::span<const std::int64_t> shape) {
  std::string dims = shape.size() == 1 ? fmt::format("{},", shape[0]) : fmt::format("{}", fmt::join(shape, ", "));
  auto dict = fmt::format("{{'descr': '<f4', 'fortran_order': False, 'shape': ({}), }}", dims);
  // magic (6) + version (2) + length (2) + dict + padding + '\n', a multiple of 64 (NumPy aligns so).
  auto total = (10 + dict.size() + 1 + 63) / 64 * 64;
  dict.append(total - 10 - dict.size() - 1, ' ');
  dict += '\n';
  auto len = static_cast<std::uint16_t>(dict.size());
  std::string out = "\x93NUMPY";
  out += '\x01';
  out += '\x00';
  out += static_cast<char>(len & 0xff);
  out += static_cast<char>(len >> 8);
  return out + dict;
}

namespace {

struct entity_part {
  std::string type;
  std::int64_t partition;
  fs::path vectors; // tsv: unused
  fs::path names;   // tsv: unused
};

struct relation_param {
  const shared_tensors::entry* entry;
  relation_param_key key;
};

// Buffered text output to an atomic_file_writer.
class text_out {
public:
  explicit text_out(atomic_file_writer& out) : out_(out) {}
  fmt::memory_buffer& buffer() { return buffer_; }
  expected<void> maybe_flush() { return buffer_.size() >= (1 << 20) ? flush() : expected<void>{}; }
  expected<void> flush() {
    auto ok = out_.write(std::string_view(buffer_.data(), buffer_.size()));
    buffer_.clear();
    return ok;
  }

private:
  atomic_file_writer& out_;
  fmt::memory_buffer buffer_;
};

void append_values(fmt::memory_buffer& buf, std::span<const float> values) {
  for (auto v : values)
    fmt::format_to(std::back_inserter(buf), "\t{}", v); // shortest repr that round-trips
}

std::string shape_x(std::span<const std::int64_t> shape) {
  return fmt::format("{}", fmt::join(shape, "x")); // PBG's "100x100"
}

expected<void> write_npy(const fs::path& path, std::span<const std::int64_t> shape, std::span<const float> data) {
  auto out = atomic_file_writer::create(path);
  if (!out)
    return std::unexpected(out.error());
  if (auto ok = out->write(npy_header(shape)); !ok)
    return ok;
  if (auto ok = out->write(std::as_bytes(data)); !ok)
    return ok;
  return out->commit();
}

class exporter {
public:
  exporter(const config& c, const export_options& o) : config_(c), options_(o) {}

  expected<export_summary> run() {
    auto meta = read_entity_meta(config_.entity_path);
    if (!meta)
      return std::unexpected(meta.error());
    meta_ = std::move(*meta);
    auto reader = checkpoint_reader::open(config_.checkpoint_path, meta_.id, options_.version);
    if (!reader)
      return std::unexpected(reader.error());
    if (auto ok = reader->check_schema(checkpoint_schema(config_)); !ok)
      return std::unexpected(ok.error());
    auto shared = reader->shared();
    if (!shared)
      return std::unexpected(shared.error());
    shared_ = std::move(*shared);
    summary_.version = reader->version();
    if (auto ok = plan(); !ok)
      return std::unexpected(ok.error());
    if (auto ok = check_outputs(); !ok)
      return std::unexpected(ok.error());
    auto ok = options_.format == export_format::tsv ? write_tsv(*reader) : write_npy_files(*reader);
    if (!ok)
      return std::unexpected(ok.error());
    return summary_;
  }

private:
  bool npy() const { return options_.format == export_format::npy; }

  // Decides every output path, so existing ones are refused before anything is written.
  expected<void> plan() {
    auto entities_out = options_.entities_output;
    if (entities_out.empty())
      entities_out = npy() ? "export" : "entities.tsv";
    auto relations_out = options_.relation_types_output;
    if (relations_out.empty())
      relations_out = npy() ? entities_out : fs::path("relation_types.tsv");
    for (auto& [type, schema] : config_.entities) {
      auto info = meta_.type(type);
      if (!info)
        return fail("entity type '{}' of the config is not in entity path {}", type, config_.entity_path);
      for (std::int64_t p = 0; p < info->num_partitions(); ++p) {
        auto base = fmt::format("{}_{}", file_safe_name(type), p);
        parts_.push_back({type, p, entities_out / fmt::format("embeddings_{}.npy", base),
                          entities_out / fmt::format("names_{}.txt", base)});
        if (npy()) {
          outputs_.push_back(parts_.back().vectors);
          outputs_.push_back(parts_.back().names);
        }
      }
    }
    for (auto& e : shared_.entries)
      if (auto key = parse_relation_param_name(e.name))
        params_.push_back({&e, std::move(*key)});
    // PBG's order: dynamic relations side by side, parameter by parameter; else relation by relation.
    std::map<std::string, std::size_t> param_rank;
    for (auto& p : params_)
      param_rank.try_emplace(p.key.param, param_rank.size());
    std::stable_sort(params_.begin(), params_.end(), [&](const relation_param& a, const relation_param& b) {
      auto rank = [&](const relation_param& x) {
        return dynamic() ? std::tuple(x.key.side, param_rank[x.key.param], x.key.relation)
                         : std::tuple(std::string(), static_cast<std::size_t>(x.key.relation),
                                      static_cast<std::int64_t>(x.key.side == "rhs"));
      };
      return rank(a) < rank(b);
    });
    if (npy()) {
      relations_dir_ = relations_out;
      for (auto& p : params_)
        outputs_.push_back(relations_out / param_file(p));
      outputs_.push_back(relations_out / "relation_types.tsv");
    } else {
      outputs_.push_back(entities_out);
      outputs_.push_back(relations_out);
    }
    return {};
  }

  bool dynamic() const { return meta_.dynamic_relations || config_.dynamic_relations; }

  static std::string param_file(const relation_param& p) {
    return fmt::format("relation_{}_{}_{}.npy", p.key.relation, p.key.side, file_safe_name(p.key.param));
  }

  expected<void> check_outputs() {
    std::error_code ec;
    for (auto& path : outputs_) {
      if (fs::is_directory(path, ec))
        return fail("output {} is a directory", path.string());
      if (!options_.force && fs::exists(path, ec))
        return fail("output {} already exists; remove it or pass --force to overwrite", path.string());
    }
    for (auto& path : outputs_) {
      fs::create_directories(path.parent_path().empty() ? fs::path(".") : path.parent_path(), ec);
      if (ec)
        return fail("cannot create directory {}: {}", path.parent_path().string(), ec.message());
    }
    return {};
  }

  // One (type, partition): names and vectors with the global embedding added.
  expected<std::pair<std::vector<std::string>, tensor>> load(const checkpoint_reader& reader,
                                                             const entity_part& part) {
    auto names = read_entity_names(config_.entity_path, meta_, part.type, part.partition);
    if (!names)
      return std::unexpected(names.error());
    auto vectors = reader.embeddings(part.type, part.partition);
    if (!vectors)
      return std::unexpected(vectors.error());
    auto rows = vectors->shape[0], dim = vectors->shape[1];
    if (static_cast<std::size_t>(rows) != names->size())
      return fail("checkpoint version {} holds {} embeddings for entity type '{}' partition {} but the entity "
                  "path names {} entities: it was trained before a later import; train again to export",
                  summary_.version, rows, part.type, part.partition, names->size());
    if (auto g = shared_.find(global_embedding_name(part.type))) {
      if (g->size != static_cast<std::uint64_t>(dim))
        return fail("global embedding of '{}' has {} values for dimension {}", part.type, g->size, dim);
      auto add = shared_.values(*g);
      for (std::int64_t r = 0; r < rows; ++r)
        for (std::int64_t k = 0; k < dim; ++k)
          vectors->data[static_cast<std::size_t>(r * dim + k)] += add[static_cast<std::size_t>(k)];
    }
    summary_.entities += rows;
    return std::pair{std::move(*names), std::move(*vectors)};
  }

  expected<std::pair<std::string, std::string>> relation_info(std::int64_t r) const {
    std::string name, op;
    if (static_cast<std::size_t>(r) < meta_.relation_names.size())
      name = meta_.relation_names[static_cast<std::size_t>(r)];
    else if (!dynamic() && static_cast<std::size_t>(r) < config_.relations.size())
      name = config_.relations[static_cast<std::size_t>(r)].name;
    else
      return fail("shared parameters name relation {} but there are only {} relations", r,
                  dynamic() ? meta_.relation_names.size() : config_.relations.size());
    auto config_index = dynamic() ? 0 : static_cast<std::size_t>(r);
    op = config_index < config_.relations.size() ? config_.relations[config_index].operator_ : "none";
    return std::pair{std::move(name), std::move(op)};
  }

  expected<void> commit(atomic_file_writer& out) {
    if (auto ok = out.commit(); !ok)
      return ok;
    summary_.files.push_back(out.path());
    return {};
  }

  expected<void> write_tsv(const checkpoint_reader& reader) {
    auto entities = atomic_file_writer::create(outputs_[0]);
    if (!entities)
      return std::unexpected(entities.error());
    text_out text(*entities);
    for (auto& part : parts_) {
      auto loaded = load(reader, part);
      if (!loaded)
        return std::unexpected(loaded.error());
      auto& [names, vectors] = *loaded;
      auto dim = static_cast<std::size_t>(vectors.shape[1]);
      for (std::size_t i = 0; i < names.size(); ++i) {
        text.buffer().append(escape_name(names[i]));
        append_values(text.buffer(), std::span<const float>(vectors.data).subspan(i * dim, dim));
        text.buffer().push_back('\n');
        if (auto ok = text.maybe_flush(); !ok)
          return ok;
      }
    }
    if (auto ok = text.flush(); !ok)
      return ok;
    auto relations = atomic_file_writer::create(outputs_[1]);
    if (!relations)
      return std::unexpected(relations.error());
    text_out rel_text(*relations);
    for (auto& p : params_) {
      auto info = relation_info(p.key.relation);
      if (!info)
        return std::unexpected(info.error());
      fmt::format_to(std::back_inserter(rel_text.buffer()), "{}\t{}\t{}\t{}\t{}", escape_name(info->first),
                     p.key.side, escape_name(info->second), escape_name(p.key.param), shape_x(p.entry->shape));
      append_values(rel_text.buffer(), shared_.values(*p.entry));
      rel_text.buffer().push_back('\n');
      ++summary_.relation_parameters;
    }
    if (auto ok = rel_text.flush(); !ok)
      return ok;
    // Both files are complete before either replaces an old one.
    if (auto ok = commit(*entities); !ok)
      return ok;
    return commit(*relations);
  }

  expected<void> write_npy_files(const checkpoint_reader& reader) {
    for (auto& part : parts_) {
      auto loaded = load(reader, part);
      if (!loaded)
        return std::unexpected(loaded.error());
      auto& [names, vectors] = *loaded;
      if (auto ok = write_npy(part.vectors, vectors.shape, vectors.data); !ok)
        return ok;
      summary_.files.push_back(part.vectors);
      auto out = atomic_file_writer::create(part.names);
      if (!out)
        return std::unexpected(out.error());
      text_out text(*out);
      for (auto& name : names) {
        text.buffer().append(escape_name(name));
        text.buffer().push_back('\n');
        if (auto ok = text.maybe_flush(); !ok)
          return ok;
      }
      if (auto ok = text.flush(); !ok)
        return ok;
      if (auto ok = commit(*out); !ok)
        return ok;
    }
    auto index = atomic_file_writer::create(relations_dir_ / "relation_types.tsv");
    if (!index)
      return std::unexpected(index.error());
    text_out text(*index);
    text.buffer().append(std::string_view("id\tname\tside\toperator\tparam\tshape\tfile\n"));
    for (auto& p : params_) {
      auto info = relation_info(p.key.relation);
      if (!info)
        return std::unexpected(info.error());
      auto file = param_file(p);
      if (auto ok = write_npy(relations_dir_ / file, p.entry->shape, shared_.values(*p.entry)); !ok)
        return ok;
      summary_.files.push_back(relations_dir_ / file);
      fmt::format_to(std::back_inserter(text.buffer()), "{}\t{}\t{}\t{}\t{}\t{}\t{}\n", p.key.relation,
                     escape_name(info->first), p.key.side, escape_name(info->second), escape_name(p.key.param),
                     shape_x(p.entry->shape), file);
      ++summary_.relation_parameters;
    }
    if (auto ok = text.flush(); !ok)
      return ok;
    return commit(*index);
  }

  const config& config_;
  const export_options& options_;
  entity_store_meta meta_;
  shared_tensors shared_;
  std::vector<entity_part> parts_;
  std::vector<relation_param> params_;
  std::vector<fs::path> outputs_;
  fs::path relations_dir_;
  export_summary summary_;
};

} // namespace

expected<export_summary> export_checkpoint(const config& c, const export_options& options) {
  return exporter(c, options).run();
}

} // namespace abg::storage
