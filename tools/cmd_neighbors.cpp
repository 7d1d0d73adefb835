// `abg neighbors CONFIG ENTITY [--k 10] [--relation R --side rhs|lhs] [--type T] [--version N]`
//
// Runs in abg itself, without LibTorch (whose libraries alone take about a
// second to load): the checkpoint's tables are memory-mapped, only those of
// ENTITY's partition and of the candidates' type, with the shared parameters;
// names come from the mapped names files; the plain scorer
// (abg/model/plain_score.h) computes what model::score_candidates computes.
#include <algorithm>
#include <limits>
#include <map>
#include <thread>

#include "abg/model/desc.h"
#include "abg/model/plain_score.h"
#include "abg/model/top_k.h"
#include "abg/storage/checkpoint_map.h"
#include "abg/storage/entity_names_view.h"
#include "tools/commands.h"
#include "tools/config_options.h"

namespace abg::tools {

namespace {

struct neighbors_args {
  config_args config;
  std::string entity;
  std::int64_t k = 10;
  std::string relation;
  std::string side = "rhs";
  std::string type;
  std::optional<std::int64_t> version;
};

// The partitions of one entity type, back to back: global index = start of
// its partition + offset (the order abg export and abg score use).
struct type_partitions {
  std::string type;
  std::vector<std::int64_t> starts; // per partition, plus the total at the end
  std::int64_t total() const { return starts.back(); }
  std::int64_t partition_of(std::int64_t index) const {
    return std::upper_bound(starts.begin(), starts.end(), index) - starts.begin() - 1;
  }
};

type_partitions partitions_of(const storage::entity_type_info& info) {
  type_partitions t{info.name, {0}};
  for (auto c : info.counts)
    t.starts.push_back(t.starts.back() + c);
  return t;
}

struct context {
  const config& cfg;
  const storage::entity_store_meta& meta;
  const model::model_desc& desc;
  const storage::checkpoint_reader& reader;
};

// Partition p of `type`, mapped once, with its row count checked against the entity path.
using table_cache = std::map<std::pair<std::string, std::int64_t>, storage::mapped_tensor>;
expected<const storage::mapped_tensor*> table_of(const context& c, table_cache& cache, const std::string& type,
                                                 std::int64_t p) {
  if (auto it = cache.find({type, p}); it != cache.end())
    return &it->second;
  auto t = storage::map_embeddings(c.reader, type, p);
  if (!t)
    return std::unexpected(t.error());
  const auto* info = c.meta.type(type);
  const auto rows = t->shape.at(0), dim = t->shape.at(1);
  if (rows != info->counts[static_cast<std::size_t>(p)])
    return fail("checkpoint version {} holds {} rows for {}/{}, the entity path {}; train again after an "
                "import that added entities",
                c.reader.version(), rows, type, p, info->counts[static_cast<std::size_t>(p)]);
  const auto want = c.desc.dims[static_cast<std::size_t>(c.desc.type_index(type))];
  if (dim != want)
    return fail("checkpoint version {} holds embeddings of dimension {} for {}/{}, the config {}",
                c.reader.version(), dim, type, p, want);
  return &cache.emplace(std::pair{type, p}, std::move(*t)).first->second;
}

// Names of every partition of `type`, opened as needed.
struct type_names {
  type_partitions parts;
  std::vector<std::optional<storage::entity_names_view>> views;
};

expected<const storage::entity_names_view*> names_of(const context& c, type_names& n, std::int64_t p) {
  auto& slot = n.views[static_cast<std::size_t>(p)];
  if (!slot) {
    auto v = storage::entity_names_view::open(c.cfg.entity_path, c.meta, n.parts.type, p);
    if (!v)
      return std::unexpected(v.error());
    slot = std::move(*v);
  }
  return &*slot;
}

void run(const neighbors_args& args) {
  auto cfg = load_config_or_report(args.config);
  if (!cfg) {
    exit_code() = 1;
    return;
  }
  auto report = [&](const error& e) {
    fmt::print(stderr, "error: {}\n", e.message);
    exit_code() = 1;
  };
  auto meta = storage::read_entity_meta(cfg->entity_path);
  if (!meta)
    return report(meta.error());
  auto desc = model::model_desc::from(*cfg, static_cast<std::int64_t>(meta->relation_names.size()));
  if (!desc)
    return report(desc.error());
  auto reader = storage::checkpoint_reader::open(cfg->checkpoint_path, meta->id, args.version);
  if (!reader)
    return report(reader.error());
  if (auto ok = reader->check_schema(storage::checkpoint_schema(*cfg)); !ok)
    return report(error{fmt::format("the checkpoint in {} does not match this config: {}", cfg->checkpoint_path,
                                    ok.error().message)});
  const context c{*cfg, *meta, *desc, *reader};

  // The relation (by name: the entity path's names, dynamic ones from the data).
  std::optional<std::int64_t> rel;
  const bool as_head = args.side == "rhs";
  if (!args.relation.empty()) {
    for (std::size_t r = 0; r < desc->relations.size(); ++r) {
      const auto& name = r < meta->relation_names.size() ? meta->relation_names[r] : desc->relations[r].name;
      if (name == args.relation)
        rel = static_cast<std::int64_t>(r);
    }
    if (!rel)
      return report(error{fmt::format("no relation named '{}' in entity path {}", args.relation, cfg->entity_path)});
  }
  const auto* rd = rel ? &desc->relations[static_cast<std::size_t>(*rel)] : nullptr;
  auto type_name = [&](std::int64_t t) { return desc->entity_types[static_cast<std::size_t>(t)]; };

  // ENTITY: the first of the searched types that has it.
  std::vector<std::string> types;
  if (rd)
    types.push_back(type_name(as_head ? rd->lhs_type : rd->rhs_type));
  else if (!args.type.empty())
    types.push_back(args.type);
  else
    types = desc->entity_types;
  std::optional<type_names> anchor_names;
  std::int64_t index = -1; // global index in its type
  for (auto& t : types) {
    const auto* info = meta->type(t);
    if (!info)
      return report(error{fmt::format("no entity type '{}' in entity path {}", t, cfg->entity_path)});
    if (desc->type_index(t) < 0)
      return report(error{fmt::format("entity type '{}' of entity path {} is not in the config", t,
                                      cfg->entity_path)});
    type_names n{partitions_of(*info), std::vector<std::optional<storage::entity_names_view>>(info->counts.size())};
    for (std::int64_t p = 0; p < info->num_partitions() && index < 0; ++p) {
      auto view = names_of(c, n, p);
      if (!view)
        return report(view.error());
      if (auto at = (*view)->find(args.entity); at >= 0)
        index = n.parts.starts[static_cast<std::size_t>(p)] + at;
    }
    if (index >= 0) {
      anchor_names = std::move(n);
      break;
    }
  }
  if (index < 0)
    return report(error{fmt::format("no entity named '{}'{} in entity path {}", args.entity,
                                    types.size() == 1 ? fmt::format(" of type '{}'", types[0]) : "",
                                    cfg->entity_path)});
  const auto& type = anchor_names->parts.type;
  const auto anchor_part = anchor_names->parts.partition_of(index);
  const auto anchor_offset = index - anchor_names->parts.starts[static_cast<std::size_t>(anchor_part)];

  // The scorer, and the candidates' type.
  auto shared = storage::map_shared(*reader);
  if (!shared)
    return report(shared.error());
  model::param_lookup lookup = [&](std::string_view name) -> std::span<const float> {
    const auto* e = shared->find(name);
    return e ? shared->values(*e) : std::span<const float>{};
  };
  std::string candidate_type = type;
  std::optional<model::plain_scorer> scorer;
  if (rd) {
    candidate_type = type_name(as_head ? rd->rhs_type : rd->lhs_type);
    auto s = model::plain_scorer::for_relation(*desc, *rel, as_head ? model::side::rhs : model::side::lhs, lookup);
    if (!s)
      return report(s.error());
    scorer = std::move(*s);
  } else { // cosine similarity of the embeddings (with the type's global embedding, as training sees them)
    std::span<const float> global;
    if (desc->global_emb) {
      auto name = storage::global_embedding_name(type);
      global = lookup(name);
      const auto d = desc->dims[static_cast<std::size_t>(desc->type_index(type))];
      if (static_cast<std::int64_t>(global.size()) != d)
        return report(error{fmt::format("shared parameter '{}' is missing from the checkpoint or is not [{}]",
                                        name, d)});
    }
    scorer = model::plain_scorer::cosine(desc->dims[static_cast<std::size_t>(desc->type_index(type))], global);
  }
  table_cache tables;
  {
    auto anchor_table = table_of(c, tables, type, anchor_part);
    if (!anchor_table)
      return report(anchor_table.error());
    const auto d = scorer->dim();
    scorer->set_anchor((*anchor_table)->values.subspan(static_cast<std::size_t>(anchor_offset * d),
                                                       static_cast<std::size_t>(d)));
  }

  // Every candidate's score, partition by partition, then the best k.
  std::optional<type_names> other_names;
  if (candidate_type != type) {
    const auto* info = meta->type(candidate_type);
    other_names = type_names{partitions_of(*info),
                             std::vector<std::optional<storage::entity_names_view>>(info->counts.size())};
  }
  auto& candidates = other_names ? *other_names : *anchor_names;
  std::vector<float> scores(static_cast<std::size_t>(candidates.parts.total()));
  const int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  for (std::size_t p = 0; p + 1 < candidates.parts.starts.size(); ++p) {
    auto table = table_of(c, tables, candidate_type, static_cast<std::int64_t>(p));
    if (!table)
      return report(table.error());
    const auto start = candidates.parts.starts[p], count = candidates.parts.starts[p + 1] - start;
    scorer->score((*table)->values, std::span<float>(scores).subspan(static_cast<std::size_t>(start),
                                                                  static_cast<std::size_t>(count)),
                  threads);
  }
  if (!rd) // not its own neighbour
    scores[static_cast<std::size_t>(index)] = -std::numeric_limits<float>::infinity();
  auto best = model::top_k(scores, args.k);

  fmt::print(stderr, "{} of '{}'{} (checkpoint version {}):\n", rd ? "best-scoring partners" : "nearest by cosine",
             args.entity, rd ? fmt::format(" as {} of {}", as_head ? "head" : "tail", args.relation) : "",
             reader->version());
  std::string out;
  for (std::size_t i = 0; i < best.size(); ++i) {
    const auto p = candidates.parts.partition_of(best[i].index);
    auto view = names_of(c, candidates, p);
    if (!view)
      return report(view.error());
    fmt::format_to(std::back_inserter(out), "{}\t{}\t{:.6f}\n", i + 1,
                   (**view)[best[i].index - candidates.parts.starts[static_cast<std::size_t>(p)]], best[i].score);
  }
  fmt::print("{}", out);
}

} // namespace

void register_neighbors_command(CLI::App& app) {
  auto args = std::make_shared<neighbors_args>();
  auto* cmd = app.add_subcommand(
    "neighbors", "List the entities that score highest with ENTITY: under --relation R (ENTITY as the head with "
                 "--side rhs, the default, or as the tail with --side lhs), or by cosine similarity of the "
                 "embeddings without a relation. Prints rank, name and score, one per line.");
  cmd->footer("Scores are the model's (global embedding, the relation's operator, the comparator), as abg score "
              "prints them; every partition of the candidates' type is scored. Without --relation the candidates "
              "are the entities of ENTITY's type (the first type that has ENTITY, or --type), ENTITY itself left "
              "out. Reads only the checkpoint tables it needs, memory-mapped; runs without LibTorch.");
  add_config_args(*cmd, args->config);
  cmd->add_option("entity", args->entity, "Entity name, as imported")->required();
  cmd->add_option("--k", args->k, "How many to list")->capture_default_str()->check(CLI::PositiveNumber);
  cmd->add_option("--relation", args->relation, "Relation name (a dynamic relation's name from the data)");
  cmd->add_option("--side", args->side, "Which side the candidates take: rhs (ENTITY is the head) or lhs")
    ->capture_default_str()
    ->check(CLI::IsMember({"rhs", "lhs"}));
  cmd->add_option("--type", args->type, "Entity type of ENTITY when no relation is given (default: search all)");
  cmd->add_option("--version", args->version, "Checkpoint version (default: the latest)");
  cmd->callback([args] { run(*args); });
}

} // namespace abg::tools
