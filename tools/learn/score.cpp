// `abg score CONFIG FILE --lhs-col N --rhs-col N [--rel-col N]`: the model's
// score of each edge of FILE, read with `abg import`'s column options.
#include <chrono>
#include <cstdio>
#include <iterator>
#include <map>
#include <unordered_map>

#include "abg/edge_lines.h"
#include "tools/column_options.h"
#include "tools/config_options.h"
#include "tools/learn/commands.h"
#include "tools/learn/loaded_model.h"

namespace abg::tools {

namespace {

// Lines scored per LibTorch call: bounds memory (a few [batch, dim] tensors)
// whatever the file's size. Measured at d=400: 1k lines a batch scores 3-4x
// faster than 10k, whose large temporaries fault in fresh pages every batch.
constexpr std::size_t batch_size = 1'000;
constexpr std::uint64_t max_reported = 10; // skipped lines quoted on stderr

struct score_args {
  config_args config;
  std::string file;
  edge_columns columns;
  column_args column_text;
  std::string side = "rhs";
  bool skip_unknown = false;
  std::optional<std::int64_t> version;
};

/// One entity type, loaded on first use: name -> row of its whole table.
struct type_rows {
  std::vector<std::string> names;
  std::unordered_map<std::string_view, std::int64_t> index; // views into `names`
  torch::Tensor table;                                      // [entities, dim], all partitions
};

class scorer {
public:
  scorer(const config& cfg, loaded_model& lm, model::side s) : cfg_(cfg), lm_(lm), side_(s) {}

  expected<type_rows*> type(std::int64_t t) {
    auto [it, fresh] = types_.try_emplace(t);
    auto& rows = it->second;
    if (!fresh)
      return &rows;
    const auto& name = lm_.desc.entity_types[static_cast<std::size_t>(t)];
    auto names = entity_names(cfg_, lm_, name);
    if (!names) {
      types_.erase(it);
      return std::unexpected(names.error());
    }
    rows.names = std::move(*names);
    rows.index.reserve(rows.names.size());
    for (std::size_t i = 0; i < rows.names.size(); ++i)
      rows.index.emplace(rows.names[i], static_cast<std::int64_t>(i));
    rows.table = lm_.whole(name);
    // whole() concatenated a copy when partitioned: drop the parts, so the
    // table is in memory once.
    if (auto parts = lm_.meta.type(name)->num_partitions(); parts > 1)
      for (std::int64_t p = 0; p < parts; ++p)
        lm_.tables.erase({name, p});
    return &rows;
  }

  /// Scores of edges (lhs[i], rel[i], rhs[i]) (global rows) into `out`, one
  /// score_candidates call per relation (its types and operator are per
  /// relation; with dynamic relations they are shared, so one call).
  void score(const std::vector<std::int64_t>& lhs, const std::vector<std::int64_t>& rel,
             const std::vector<std::int64_t>& rhs, std::vector<float>& out) {
    out.assign(lhs.size(), 0.0f);
    std::map<std::int64_t, std::vector<std::int64_t>> groups; // relation (0 for all when dynamic) -> positions
    for (std::size_t i = 0; i < lhs.size(); ++i)
      groups[lm_.desc.dynamic ? 0 : rel[i]].push_back(static_cast<std::int64_t>(i));
    for (auto& [group_rel, positions] : groups) {
      auto& rd = lm_.desc.relations[static_cast<std::size_t>(group_rel)];
      auto pos = torch::from_blob(positions.data(), {static_cast<std::int64_t>(positions.size())}, torch::kInt64);
      auto pick = [&](const std::vector<std::int64_t>& v) {
        return torch::from_blob(const_cast<std::int64_t*>(v.data()), {static_cast<std::int64_t>(v.size())},
                                torch::kInt64)
          .index_select(0, pos);
      };
      auto lhs_rows = types_.at(rd.lhs_type).table.index_select(0, pick(lhs));
      auto rhs_rows = types_.at(rd.rhs_type).table.index_select(0, pick(rhs));
      // score_candidates also scores candidates; one row keeps that negligible.
      auto filler = (side_ == model::side::rhs ? rhs_rows : lhs_rows).narrow(0, 0, 1);
      auto s = model::score_candidates(lm_.desc, lm_.params, side_, lhs_rows, rhs_rows, pick(rel), filler)
                 .pos.to(torch::kFloat32)
                 .contiguous();
      const float* p = s.data_ptr<float>();
      for (std::size_t k = 0; k < positions.size(); ++k)
        out[static_cast<std::size_t>(positions[k])] = p[k];
    }
  }

private:
  const config& cfg_;
  loaded_model& lm_;
  model::side side_;
  std::map<std::int64_t, type_rows> types_; // node-based: `index` views into `names` stay valid
};

void run(score_args& args, int& exit_code) {
  auto report = [&](const error& e) {
    fmt::print(stderr, "error: {}\n", e.message);
    exit_code = 1;
  };
  auto cfg = load_config_or_report(args.config);
  if (!cfg) {
    exit_code = 1;
    return;
  }
  if (auto ok = finish_columns(args.columns, args.column_text); !ok)
    return report(ok.error());
  const auto started = std::chrono::steady_clock::now();
  torch::NoGradGuard no_grad;
  auto lm = load_model(*cfg, args.version);
  if (!lm)
    return report(lm.error());
  const auto& desc = lm->desc;
  std::vector<std::string> relation_names;
  for (std::size_t r = 0; r < desc.relations.size(); ++r)
    relation_names.push_back(lm->relation_name(r));
  std::unordered_map<std::string_view, std::int64_t> relation_ids; // views into relation_names
  for (std::size_t r = 0; r < relation_names.size(); ++r)
    relation_ids.emplace(relation_names[r], static_cast<std::int64_t>(r));
  // Without --rel-col every line is relation 0, which is only unambiguous
  // when the model has one relation (import's rule, seen from the model).
  if (!args.columns.rel_col && desc.relations.size() != 1)
    return report(error{fmt::format("the model has {} relations but no --rel-col was given; say which column names "
                                    "the relation",
                                    desc.relations.size())});

  const bool from_stdin = args.file == "-";
  auto reader = from_stdin ? line_reader::open_stdin() : line_reader::open(args.file);
  if (!reader)
    return report(reader.error());
  const std::string file_name = from_stdin ? std::string("standard input") : args.file;

  scorer sc(*cfg, *lm, args.side == "rhs" ? model::side::rhs : model::side::lhs);
  const int needed = args.columns.needed();
  std::vector<std::string_view> fields(static_cast<std::size_t>(needed));
  // A batch holds views into the current block: it is scored before the next block is read.
  std::vector<std::string_view> lhs_names, rel_names, rhs_names;
  std::vector<std::int64_t> lhs_ids, rel_ids, rhs_ids;
  std::vector<float> scores;
  fmt::memory_buffer out;
  std::uint64_t line_number = 0, scored = 0, skipped = 0;
  auto flush = [&] {
    if (lhs_ids.empty())
      return;
    sc.score(lhs_ids, rel_ids, rhs_ids, scores);
    out.clear();
    for (std::size_t i = 0; i < scores.size(); ++i)
      fmt::format_to(std::back_inserter(out), "{}\t{}\t{}\t{:.6f}\n", lhs_names[i], rel_names[i], rhs_names[i],
                     scores[i]);
    std::fwrite(out.data(), 1, out.size(), stdout);
    scored += lhs_ids.size();
    for (auto* v : {&lhs_names, &rel_names, &rhs_names})
      v->clear();
    for (auto* v : {&lhs_ids, &rel_ids, &rhs_ids})
      v->clear();
  };
  // Lines before a fatal one are printed first, so stdout always ends just
  // before the line the error names.
  auto fatal = [&](const std::string& message) {
    flush();
    std::fflush(stdout);
    report(error{message});
  };

  bool header = args.column_text.skip_header;
  std::string_view block;
  for (;;) {
    auto more = reader->next_block(block);
    if (!more)
      return fatal(more.error().message);
    if (!*more)
      break;
    while (!block.empty()) {
      auto line = take_line(block);
      ++line_number;
      if (header) {
        header = false;
        continue;
      }
      if (is_blank(line))
        continue;
      auto where = [&] { return fmt::format("{}:{}", file_name, line_number); };
      if (int got = args.columns.split(line, fields); got < needed)
        return fatal(fmt::format("{}: {} column(s), need at least {}: \"{}\"", where(), got, needed, excerpt(line)));
      auto field = [&](int col) { return fields[static_cast<std::size_t>(col)]; };
      if (field(args.columns.lhs_col).empty() || field(args.columns.rhs_col).empty() ||
          (args.columns.rel_col && field(*args.columns.rel_col).empty()))
        return fatal(fmt::format("{}: empty field in \"{}\"", where(), excerpt(line)));

      std::string unknown;
      std::int64_t rel = 0;
      std::string_view rel_name = relation_names[0]; // printed when there is no --rel-col
      if (args.columns.rel_col) {
        rel_name = field(*args.columns.rel_col);
        auto it = relation_ids.find(rel_name);
        if (it == relation_ids.end())
          unknown = fmt::format("no relation named '{}' (the model has {} relations)", excerpt(rel_name),
                                desc.relations.size());
        else
          rel = it->second;
      }
      std::int64_t ids[2] = {-1, -1};
      if (unknown.empty()) {
        auto& rd = desc.relations[static_cast<std::size_t>(rel)];
        const std::int64_t side_types[2] = {rd.lhs_type, rd.rhs_type};
        const int cols[2] = {args.columns.lhs_col, args.columns.rhs_col};
        for (int s = 0; s < 2 && unknown.empty(); ++s) {
          auto rows = sc.type(side_types[s]);
          if (!rows)
            return fatal(rows.error().message);
          auto name = field(cols[s]);
          auto it = (*rows)->index.find(name);
          if (it == (*rows)->index.end())
            unknown = fmt::format("no entity named '{}' of type '{}' (the {} of relation '{}')", excerpt(name),
                                  desc.entity_types[static_cast<std::size_t>(side_types[s])], s == 0 ? "lhs" : "rhs",
                                  relation_names[static_cast<std::size_t>(rel)]);
          else
            ids[s] = it->second;
        }
      }
      if (!unknown.empty()) {
        if (!args.skip_unknown)
          return fatal(fmt::format("{}: {}; --skip-unknown skips such lines", where(), unknown));
        if (++skipped <= max_reported)
          fmt::print(stderr, "warning: {}: {}; line skipped\n", where(), unknown);
        continue;
      }
      lhs_names.push_back(field(args.columns.lhs_col));
      rhs_names.push_back(field(args.columns.rhs_col));
      rel_names.push_back(rel_name);
      lhs_ids.push_back(ids[0]);
      rel_ids.push_back(rel);
      rhs_ids.push_back(ids[1]);
      if (lhs_ids.size() == batch_size)
        flush();
    }
    flush(); // the block's views end here
  }
  std::fflush(stdout);
  auto seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  fmt::print(stderr, "scored {} edge(s) of {} in {:.2f} s (checkpoint version {}){}\n", scored, file_name, seconds,
             lm->version, skipped ? fmt::format("; skipped {} line(s) with unknown names", skipped) : "");
}

} // namespace

void register_score_command(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<score_args>();
  auto* cmd = app.add_subcommand(
    "score", "Score every edge of FILE with the latest (or --version) checkpoint: prints lhs, relation, rhs and the "
             "model's score, tab-separated, one line per edge, in FILE's order.");
  cmd->footer(
    "FILE (plain or gzip; - for standard input) takes abg import's column options. The score is the one training "
    "gives the edge as a positive: global embeddings added, the relation's operator, the comparator. With "
    "dynamic_relations an edge has one score per side: --side rhs (the default) is the score that ranks it among rhs "
    "candidates, as `abg neighbors LHS --relation R` lists it; --side lhs the one that ranks it among lhs "
    "candidates, as `abg neighbors RHS --relation R --side lhs`. Without dynamic relations both are the same. Blank "
    "lines are skipped. A line with too few columns, or a name the entity path does not hold, stops abg score with "
    "its file and line (lines before it are printed); with --skip-unknown unknown names skip the line instead.");
  add_config_args(*cmd, args->config);
  cmd->add_option("FILE", args->file, "Edge file (one edge per line), or - for standard input")->required();
  add_column_args(*cmd, args->columns, args->column_text);
  cmd->add_option("--side", args->side,
                  "With dynamic_relations, which side's score: rhs (ranks the tail, the default) or lhs")
    ->capture_default_str()
    ->check(CLI::IsMember({"rhs", "lhs"}));
  cmd->add_flag("--skip-unknown", args->skip_unknown,
                "Skip lines naming an entity or relation the entity path does not hold (the first few are "
                "reported on stderr) instead of stopping");
  cmd->add_option("--version", args->version, "Checkpoint version (default: the latest)");
  cmd->callback([args, &exit_code] { run(*args, exit_code); });
}

} // namespace abg::tools
