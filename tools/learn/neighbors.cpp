// `abg neighbors CONFIG ENTITY [--k 10] [--relation R --side rhs|lhs] [--type T]`
#include <algorithm>

#include "tools/config_options.h"
#include "tools/learn/commands.h"
#include "tools/learn/loaded_model.h"

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

void run(const neighbors_args& args, int& exit_code) {
  auto cfg = load_config_or_report(args.config);
  if (!cfg) {
    exit_code = 1;
    return;
  }
  auto report = [&](const error& e) {
    fmt::print(stderr, "error: {}\n", e.message);
    exit_code = 1;
  };
  torch::NoGradGuard no_grad;
  auto lm = load_model(*cfg, args.version);
  if (!lm)
    return report(lm.error());
  // The relation (by name) and the types of ENTITY and of the candidates.
  std::optional<std::int64_t> rel;
  bool as_head = args.side == "rhs";
  if (!args.relation.empty()) {
    for (std::size_t r = 0; r < lm->desc.relations.size(); ++r)
      if (lm->relation_name(r) == args.relation)
        rel = static_cast<std::int64_t>(r);
    if (!rel)
      return report(error{fmt::format("no relation named '{}' in entity path {}", args.relation, cfg->entity_path)});
  }
  std::vector<std::string> types;
  if (rel) {
    auto& r = lm->desc.relations[static_cast<std::size_t>(*rel)];
    types.push_back(lm->desc.entity_types[static_cast<std::size_t>(as_head ? r.lhs_type : r.rhs_type)]);
  } else if (!args.type.empty()) {
    types.push_back(args.type);
  } else {
    types = lm->desc.entity_types;
  }
  std::string type;
  std::int64_t index = -1;
  std::vector<std::string> anchor_names; // global index -> name
  for (auto& t : types) {
    if (!lm->meta.type(t))
      return report(error{fmt::format("no entity type '{}' in entity path {}", t, cfg->entity_path)});
    auto names = entity_names(*cfg, *lm, t);
    if (!names)
      return report(names.error());
    auto it = std::find(names->begin(), names->end(), args.entity);
    if (it != names->end()) {
      type = t;
      index = it - names->begin();
      anchor_names = std::move(*names);
      break;
    }
  }
  if (index < 0)
    return report(error{fmt::format("no entity named '{}'{} in entity path {}", args.entity,
                                    types.size() == 1 ? fmt::format(" of type '{}'", types[0]) : "",
                                    cfg->entity_path)});
  torch::Tensor scores;
  std::vector<std::string> candidate_names;
  std::string candidate_type = type;
  auto anchor = lm->whole(type).narrow(0, index, 1);
  if (rel) {
    auto& r = lm->desc.relations[static_cast<std::size_t>(*rel)];
    candidate_type = lm->desc.entity_types[static_cast<std::size_t>(as_head ? r.rhs_type : r.lhs_type)];
    auto candidates = lm->whole(candidate_type);
    auto rel_ids = torch::full({1}, *rel, torch::kInt64);
    auto filler = candidates.narrow(0, 0, 1);
    auto s = as_head ? model::score_candidates(lm->desc, lm->params, model::side::rhs, anchor, filler, rel_ids,
                                               candidates)
                     : model::score_candidates(lm->desc, lm->params, model::side::lhs, filler, anchor, rel_ids,
                                               candidates);
    scores = s.neg.squeeze(0);
  } else { // cosine similarity of the embeddings (with the type's global embedding, as training sees them)
    auto table = lm->whole(type);
    auto global = lm->params.values.find("global_emb." + type);
    if (global != lm->params.values.end()) {
      table = table + global->second;
      anchor = anchor + global->second;
    }
    scores = torch::nn::functional::cosine_similarity(
      table, anchor, torch::nn::functional::CosineSimilarityFuncOptions().dim(1).eps(1e-12));
    scores.index_put_({index}, -std::numeric_limits<float>::infinity()); // not its own neighbour
  }
  if (candidate_type == type) {
    candidate_names = std::move(anchor_names);
  } else {
    auto names = entity_names(*cfg, *lm, candidate_type);
    if (!names)
      return report(names.error());
    candidate_names = std::move(*names);
  }
  auto k = std::min<std::int64_t>(args.k, scores.size(0));
  auto [top, idx] = scores.topk(k);
  fmt::print(stderr, "{} of '{}'{} (checkpoint version {}):\n", rel ? "best-scoring partners" : "nearest by cosine",
             args.entity, rel ? fmt::format(" as {} of {}", as_head ? "head" : "tail", args.relation) : "",
             lm->version);
  for (std::int64_t i = 0; i < k; ++i)
    fmt::print("{}\t{}\t{:.6f}\n", i + 1, candidate_names[static_cast<std::size_t>(idx[i].item<std::int64_t>())],
               top[i].item<float>());
}

} // namespace

void register_neighbors_command(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<neighbors_args>();
  auto* cmd = app.add_subcommand(
    "neighbors", "List the entities that score highest with ENTITY: under --relation R (ENTITY as the head with "
                 "--side rhs, the default, or as the tail with --side lhs), or by cosine similarity of the "
                 "embeddings without a relation. Prints rank, name and score, one per line.");
  add_config_args(*cmd, args->config);
  cmd->add_option("entity", args->entity, "Entity name, as imported")->required();
  cmd->add_option("--k", args->k, "How many to list")->capture_default_str()->check(CLI::PositiveNumber);
  cmd->add_option("--relation", args->relation, "Relation name (a dynamic relation's name from the data)");
  cmd->add_option("--side", args->side, "Which side the candidates take: rhs (ENTITY is the head) or lhs")
    ->capture_default_str()
    ->check(CLI::IsMember({"rhs", "lhs"}));
  cmd->add_option("--type", args->type, "Entity type of ENTITY when no relation is given (default: search all)");
  cmd->add_option("--version", args->version, "Checkpoint version (default: the latest)");
  cmd->callback([args, &exit_code] { run(*args, exit_code); });
}

} // namespace abg::tools
