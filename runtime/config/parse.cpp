// Reading and validating the TOML config. Overrides are applied to the parsed
// TOML tree first, so one validation pass checks file values and -p values
// alike; every problem is collected and reported together.
#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>
#include <tuple>
#include <unordered_map>

#include <toml++/toml.h>

#include "abg/config.h"
#include "runtime/config/fields.h"

namespace abg {

namespace {

using namespace config_detail;

constexpr auto override_line = std::numeric_limits<std::size_t>::max();

/// Where a problem is: a file position, or the -p override that set the value.
struct place {
  std::size_t line = 0;
  std::size_t column = 0; // for overrides: their index
  std::string label;
};

struct note {
  std::size_t line;
  std::size_t column;
  std::string text;
};

class context {
public:
  context(std::string_view source, const std::vector<std::string>& overrides)
    : source_(source), overrides_(overrides) {
  }

  place at(const toml::source_region& r) const {
    return {r.begin.line, r.begin.column,
            fmt::format("{}:{}:{}", source_, r.begin.line, r.begin.column)};
  }

  place at(const toml::node& n) const {
    if (auto i = set_by_.find(&n); i != set_by_.end())
      return at_override(i->second);
    return at(n.source());
  }

  place at_override(std::size_t index) const {
    return {override_line, index, "-p " + overrides_[index]};
  }

  /// Records that override `index` created node `n` (and its elements).
  void mark(const toml::node* n, std::size_t index) {
    set_by_[n] = index;
    if (auto* a = n->as_array())
      for (const auto& e : *a)
        set_by_[&e] = index;
  }

  void forget(const toml::node* n) {
    if (n == nullptr)
      return;
    if (auto* a = n->as_array())
      for (const auto& e : *a)
        set_by_.erase(&e);
    set_by_.erase(n);
  }

  void error(const place& p, std::string_view path, std::string_view message) {
    errors.push_back({p.line, p.column, fmt::format("{}: {}: {}", p.label, path, message)});
  }

  void warn(const place& p, std::string_view path, std::string_view message) {
    warnings.push_back({p.line, p.column, fmt::format("{}: {}: {}", p.label, path, message)});
  }

  const std::vector<std::string>& overrides() const { return overrides_; }

  std::vector<note> errors;
  std::vector<note> warnings;

private:
  std::string source_;
  const std::vector<std::string>& overrides_;
  std::unordered_map<const toml::node*, std::size_t> set_by_;
};

/// Notes in file order, overrides after the file in the order given.
std::vector<std::string> sorted(std::vector<note> notes) {
  std::ranges::stable_sort(notes, {}, [](const note& n) { return std::pair{n.line, n.column}; });
  std::vector<std::string> out;
  for (auto& n : notes)
    out.push_back(std::move(n.text));
  return out;
}

std::string join_path(std::string_view prefix, std::string_view name) {
  return prefix.empty() ? std::string(name) : fmt::format("{}.{}", prefix, name);
}

std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j)
    row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      std::size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

/// ", did you mean 'x'?" for the nearest candidate when it is close enough.
std::string suggestion(std::string_view given, std::span<const std::string_view> candidates) {
  std::string_view best;
  auto best_distance = std::numeric_limits<std::size_t>::max();
  for (auto c : candidates)
    if (auto d = edit_distance(given, c); d < best_distance)
      best = c, best_distance = d;
  if (best_distance <= std::max<std::size_t>(1, given.size() / 3))
    return fmt::format(", did you mean '{}'?", best);
  return {};
}

template <class S, std::size_t N>
std::vector<std::string_view> names_of(const std::array<field<S>, N>& fields) {
  std::vector<std::string_view> out;
  for (const auto& f : fields)
    out.push_back(f.name);
  return out;
}

// Keys that users of other libraries write for what abg has under PBG's name.
constexpr std::array<std::pair<std::string_view, std::string_view>, 1> foreign_keys{{
    {"reciprocal_relations",
     "kbc's and LibKGE's reciprocal relations are PBG's dynamic_relations = true here: each relation gets its own "
     "lhs and rhs operators, and heads are ranked through the rhs one (docs/config.md)"},
}};

std::string unknown_key(std::string_view name, std::span<const std::string_view> candidates) {
  if (auto f = std::ranges::find(foreign_keys, name, &std::pair<std::string_view, std::string_view>::first);
      f != foreign_keys.end())
    return fmt::format("unknown key; {}", f->second);
  auto hint = suggestion(name, candidates);
  return hint.empty() ? "unknown key (abg config --help lists the keys)"
                      : fmt::format("unknown key{}", hint);
}

template <class S, std::size_t N>
const field<S>* find_field(const std::array<field<S>, N>& fields, std::string_view name) {
  auto i = std::ranges::find(fields, name, &field<S>::name);
  return i == fields.end() ? nullptr : &*i;
}

/// A node's value as a user would write it, for "got ..." in messages.
std::string given(const toml::node& n) {
  if (n.is_table())
    return "a table";
  if (auto* a = n.as_array()) {
    std::string out = "[";
    for (std::size_t i = 0; i < a->size(); ++i)
      out += (i == 0 ? "" : ", ") + given(*a->get(i));
    return out + "]";
  }
  if (auto* i = n.as_integer())
    return toml_text(i->get());
  if (auto* x = n.as_floating_point())
    return toml_text(x->get());
  if (auto* b = n.as_boolean())
    return toml_text(b->get());
  if (auto* s = n.as_string())
    return toml_text(std::string_view{s->get()});
  std::ostringstream out; // dates and times
  out << toml::toml_formatter{n};
  return std::move(out).str();
}

template <class T>
std::optional<T> convert(const toml::node& n) {
  if constexpr (std::is_same_v<T, std::int64_t>) {
    if (auto* i = n.as_integer())
      return i->get();
    // PBG configs are Python, where users write 1e9 for an integer.
    if (auto* x = n.as_floating_point()) {
      double v = x->get();
      if (std::isfinite(v) && v == std::trunc(v) && std::abs(v) < 9.2e18)
        return static_cast<std::int64_t>(v);
    }
  } else if constexpr (std::is_same_v<T, double>) {
    if (auto* i = n.as_integer())
      return static_cast<double>(i->get());
    if (auto* x = n.as_floating_point())
      return x->get();
  } else if constexpr (std::is_same_v<T, bool>) {
    if (auto* b = n.as_boolean())
      return b->get();
  } else if constexpr (std::is_same_v<T, std::string>) {
    if (auto* s = n.as_string())
      return s->get();
  }
  return std::nullopt;
}

template <class S, class T>
bool satisfies(const field<S>& f, const T& v) {
  if constexpr (std::is_same_v<T, std::int64_t> || std::is_same_v<T, double>) {
    switch (f.check) {
      case rule::positive: return v > 0;
      case rule::non_negative: return v >= 0;
      case rule::fraction: return v >= 0 && v <= 1;
      case rule::at_least_minus_one: return v >= -1;
      default: return true;
    }
  } else if constexpr (std::is_same_v<T, std::string>) {
    if (f.check == rule::non_empty && v.empty())
      return false;
    return f.choices.empty() || std::ranges::find(f.choices, v) != f.choices.end();
  } else {
    return true;
  }
}

template <class S>
void read_field(const field<S>& f, const toml::node& n, const std::string& path, S& out,
                context& ctx) {
  auto mismatch = [&] {
    ctx.error(ctx.at(n), path, fmt::format("got {}, expected {}", given(n), expected_text(f)));
  };
  std::visit(
    [&](auto ptr) {
      using T = value_of<decltype(ptr)>;
      if constexpr (std::is_same_v<T, std::vector<std::string>>) {
        auto* a = n.as_array();
        if (a == nullptr)
          return mismatch();
        T list;
        bool ok = true;
        for (std::size_t i = 0; i < a->size(); ++i) {
          const auto& e = *a->get(i);
          if (auto* s = e.as_string()) {
            list.push_back(s->get());
          } else {
            ctx.error(ctx.at(e), fmt::format("{}.{}", path, i),
                      fmt::format("got {}, expected a string", given(e)));
            ok = false;
          }
        }
        if (ok)
          out.*ptr = std::move(list);
      } else {
        auto v = convert<T>(n);
        if (!v || !satisfies(f, *v))
          return mismatch();
        out.*ptr = std::move(*v);
      }
    },
    f.ptr);
}

/// Reads the keys of `t` that `fields` describes into `out`; `others` are
/// keys the caller reads itself.
template <class S, std::size_t N>
void read_table(const toml::table& t, std::string_view prefix,
                const std::array<field<S>, N>& fields, S& out, context& ctx,
                std::span<const std::string_view> others = {}) {
  for (const auto& [k, v] : t) {
    auto path = join_path(prefix, k.str());
    if (std::ranges::find(others, k.str()) != others.end())
      continue;
    if (auto* f = find_field(fields, k.str())) {
      read_field(*f, v, path, out, ctx);
    } else if (!std::is_same_v<S, config> && find_field(config_fields, k.str())) {
      // TOML puts every key after a [table] header into that table.
      ctx.error(ctx.at(k.source()), path,
                fmt::format("unknown key here; '{}' is a top-level key, so it must come before "
                            "the first [table] header",
                            k.str()));
    } else {
      auto candidates = names_of(fields);
      candidates.insert(candidates.end(), others.begin(), others.end());
      ctx.error(ctx.at(k.source()), path, unknown_key(k.str(), candidates));
    }
  }
  for (const auto& f : fields)
    if (f.is_required && !t.contains(f.name))
      ctx.error(ctx.at(t), join_path(prefix, f.name),
                fmt::format("missing, expected {}", expected_text(f)));
}

constexpr std::string_view root_tables[] = {"entities", "relations"};

// --- overrides ----------------------------------------------------------------

template <class T>
std::optional<T> parse_number(std::string_view text) {
  T v{};
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc{} || end != text.data() + text.size())
    return std::nullopt;
  return v;
}

std::vector<std::string_view> split(std::string_view text, char separator) {
  std::vector<std::string_view> out;
  for (std::size_t start = 0;;) {
    auto end = text.find(separator, start);
    out.push_back(text.substr(start, end - start));
    if (end == std::string_view::npos)
      return out;
    start = end + 1;
  }
}

/// Stores override text as the TOML value the field's type calls for. Text
/// that does not parse is stored as a string, so validation reports it like a
/// wrong value in the file.
template <class T>
void put(toml::table& t, const std::string& name, std::string_view text) {
  if constexpr (std::is_same_v<T, std::int64_t>) {
    if (auto i = parse_number<std::int64_t>(text))
      return (void)t.insert_or_assign(name, *i);
    if (auto x = parse_number<double>(text))
      return (void)t.insert_or_assign(name, *x);
  } else if constexpr (std::is_same_v<T, double>) {
    if (auto x = parse_number<double>(text))
      return (void)t.insert_or_assign(name, *x);
  } else if constexpr (std::is_same_v<T, bool>) {
    // PBG users come from Python: accept True/False too.
    if (text == "true" || text == "True")
      return (void)t.insert_or_assign(name, true);
    if (text == "false" || text == "False")
      return (void)t.insert_or_assign(name, false);
  } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
    toml::array list;
    if (!text.empty())
      for (auto part : split(text, ','))
        list.push_back(std::string(part));
    return (void)t.insert_or_assign(name, std::move(list));
  }
  t.insert_or_assign(name, std::string(text));
}

template <class S, std::size_t N>
void set(const std::array<field<S>, N>& fields, toml::table& t, const std::string& name,
         const std::string& path, std::string_view value, std::size_t index, context& ctx) {
  auto* f = find_field(fields, name);
  if (f == nullptr)
    return ctx.error(ctx.at_override(index), path, unknown_key(name, names_of(fields)));
  ctx.forget(t.get(name));
  std::visit([&](auto ptr) { put<value_of<decltype(ptr)>>(t, name, value); }, f->ptr);
  ctx.mark(t.get(name), index);
}

/// The table `parent[name]`, created (and attributed to the override) if absent.
toml::table* child_table(toml::table& parent, const std::string& name, const std::string& path,
                         std::size_t index, context& ctx) {
  if (auto* n = parent.get(name)) {
    if (auto* t = n->as_table())
      return t;
    ctx.error(ctx.at_override(index), path,
              fmt::format("the config has {} there, not a table", given(*n)));
    return nullptr;
  }
  auto* t = parent.insert(name, toml::table{}).first->second.as_table();
  ctx.mark(t, index);
  return t;
}

void apply_override(toml::table& root, std::size_t index, context& ctx) {
  std::string_view text = ctx.overrides()[index];
  auto eq = text.find('=');
  if (eq == std::string_view::npos || eq == 0)
    return ctx.error(ctx.at_override(index), text,
                     "expected KEY=VALUE, e.g. dimension=200 or relations.0.operator=translation");
  std::string path(text.substr(0, eq));
  auto value = text.substr(eq + 1);
  auto parts = split(path, '.');
  auto name = std::string(parts.back());
  if (parts.size() == 1 && std::ranges::find(root_tables, parts[0]) == std::end(root_tables))
    return set(config_fields, root, name, path, value, index, ctx);
  if (parts[0] == "entities" && parts.size() >= 3) {
    // Entity type names may contain dots: everything between is the name.
    auto type = path.substr(parts[0].size() + 1, path.size() - parts[0].size() - name.size() - 2);
    auto* entities = child_table(root, "entities", "entities", index, ctx);
    if (auto* t = entities ? child_table(*entities, type, "entities." + type, index, ctx) : nullptr)
      set(entity_fields, *t, name, path, value, index, ctx);
    return;
  }
  if (parts[0] == "relations" && parts.size() == 3) {
    auto* relations = root.get_as<toml::array>("relations");
    auto count = relations ? relations->size() : 0;
    auto i = parse_number<std::size_t>(parts[1]);
    if (!i || *i >= count)
      return ctx.error(ctx.at_override(index), path,
                       fmt::format("no relation {} (the config has {}, numbered from 0)", parts[1],
                                   count));
    if (auto* t = relations->get_as<toml::table>(*i))
      set(relation_fields, *t, name, path, value, index, ctx);
    return;
  }
  auto candidates = names_of(config_fields);
  candidates.insert(candidates.end(), std::begin(root_tables), std::end(root_tables));
  ctx.error(ctx.at_override(index), path,
            parts[0] == "entities" || parts[0] == "relations"
              ? "expected entities.NAME.KEY or relations.INDEX.KEY"
              : unknown_key(parts[0], candidates));
}

// --- the whole config ---------------------------------------------------------

std::string quoted_list(const std::vector<std::string>& names) {
  std::vector<std::string> out;
  for (const auto& n : names)
    out.push_back(fmt::format("'{}'", n));
  return fmt::format("{}", fmt::join(out, ", "));
}

/// Rules between keys: PBG's enforced ones are errors, the ones it only notes
/// (or fails on later, at training time) are warnings.
void check_rules(const config& c, const toml::table& root,
                 const std::vector<const toml::table*>& relation_tables,
                 const std::vector<std::string>& entity_names, context& ctx) {
  auto at_key = [&](std::string_view key) {
    auto* n = root.get(key);
    return n ? ctx.at(*n) : ctx.at(root);
  };
  std::vector<std::string_view> entity_candidates(entity_names.begin(), entity_names.end());
  for (std::size_t i = 0; i < relation_tables.size(); ++i) {
    if (relation_tables[i] == nullptr)
      continue;
    for (auto side : {"lhs", "rhs"}) {
      auto* n = relation_tables[i]->get(side);
      auto* s = n ? n->as_string() : nullptr;
      if (s == nullptr || s->get().empty()
          || std::ranges::find(entity_names, s->get()) != entity_names.end())
        continue;
      ctx.error(ctx.at(*n), fmt::format("relations.{}.{}", i, side),
                entity_names.empty()
                  ? fmt::format("got {}, expected an entity type, but none is defined",
                                given(*n))
                  : fmt::format("got {}, expected a defined entity type ({}){}", given(*n),
                                quoted_list(entity_names),
                                suggestion(s->get(), entity_candidates)));
    }
  }
  if (c.dynamic_relations && c.relations.size() > 1)
    ctx.error(at_key("dynamic_relations"), "dynamic_relations",
              fmt::format("got true with {} [[relations]] entries, expected exactly one (with "
                          "dynamic relations it is the schema every relation type shares)",
                          c.relations.size()));
  if (c.disable_lhs_negs && c.disable_rhs_negs)
    ctx.error(at_key("disable_rhs_negs"), "disable_rhs_negs",
              "got true while disable_lhs_negs is true too, expected negatives on at least one "
              "side");
  if (c.checkpoint_replicas > 1)
    ctx.error(at_key("checkpoint_replicas"), "checkpoint_replicas",
              fmt::format("got {}, expected 0 or 1 (one copy of each partition on another node)",
                          c.checkpoint_replicas));
  else if (c.checkpoint_replicas > 0 && c.checkpoint_mode != "local")
    ctx.error(at_key("checkpoint_replicas"), "checkpoint_replicas",
              fmt::format("got {} with checkpoint_mode = \"{}\", expected 0: replicas are copies of the partitions "
                          "that partition servers write themselves (checkpoint_mode = \"local\")",
                          c.checkpoint_replicas, c.checkpoint_mode));

  if (!ctx.errors.empty())
    return;
  if (c.num_batch_negs > 0 && c.batch_size % c.num_batch_negs != 0)
    ctx.warn(at_key("batch_size"), "batch_size",
             fmt::format("{} is not a multiple of num_batch_negs ({}): the last chunk of each "
                         "batch has fewer batch negatives",
                         c.batch_size, c.num_batch_negs));
  if (c.loss_fn == "logistic" && c.comparator == "cos")
    ctx.warn(at_key("loss_fn"), "loss_fn",
             "logistic loss with the cos comparator (scores in [-1, 1]) rarely learns well");
  if (c.background_io)
    ctx.warn(at_key("background_io"), "background_io", "deprecated in PBG, has no effect");
  // PBG's knobs for torch.distributed: accepted, but they tune nothing here.
  const std::tuple<const char*, std::int64_t, std::int64_t> group_knobs[] = {
    {"num_groups_for_partition_server", c.num_groups_for_partition_server, 16},
    {"num_groups_per_sharded_partition_server", c.num_groups_per_sharded_partition_server, 1}};
  for (const auto& [key, value, pbg_default] : group_knobs)
    if (value != pbg_default)
      ctx.warn(at_key(key), key,
               "has no effect: it sizes torch.distributed process groups, and abg's actors message each other "
               "directly");
  if (c.partition_shard_size != 250)
    ctx.warn(at_key("partition_shard_size"), "partition_shard_size",
             "has no effect: partitions travel in chunks of at most 8 MiB, requested one at a time");
  if (c.early_stopping && c.eval_fraction == 0)
    ctx.warn(at_key("early_stopping"), "early_stopping",
             "true with eval_fraction = 0: there are no held-out edges to measure the loss on, so training "
             "never stops early; set eval_fraction > 0 (e.g. 0.05)");
  for (std::size_t i = 0; i < c.relations.size(); ++i) {
    const auto& r = c.relations[i];
    if (r.operator_ != "complex_diagonal")
      continue;
    std::vector<std::string> sides{r.rhs};
    if (c.dynamic_relations && r.lhs != r.rhs)
      sides.push_back(r.lhs);
    for (const auto& type : sides)
      if (auto d = c.dimension_of(type); d % 2 != 0)
        ctx.warn(ctx.at(*relation_tables[i]->get("operator")),
                 fmt::format("relations.{}.operator", i),
                 fmt::format("complex_diagonal needs an even dimension (real half, imaginary "
                             "half), but entity type '{}' has dimension {}",
                             type, d));
  }
  if (c.bucket_order == "buffer" && c.buffer_capacity < 2)
    ctx.error(at_key("bucket_order"), "bucket_order",
              fmt::format("got \"buffer\" with buffer_capacity = {}, expected a buffer_capacity of at least 2: the "
                          "order is made for a partition buffer of that many partitions",
                          c.buffer_capacity));
  if (c.buffer_capacity > 0) {
    // What one bucket needs resident: a partition of each partitioned side.
    std::int64_t least = 0;
    for (auto side : {&relation_schema::lhs, &relation_schema::rhs})
      if (std::ranges::any_of(c.relations, [&](const auto& r) { return c.entity(r.*side)->num_partitions > 1; }))
        ++least;
    if (least == 0)
      ctx.error(at_key("buffer_capacity"), "buffer_capacity",
                fmt::format("got {} but no entity type of a relation is partitioned (num_partitions > 1): there is "
                            "nothing to buffer; set buffer_capacity = 0",
                            c.buffer_capacity));
    else if (c.buffer_capacity < least)
      ctx.error(at_key("buffer_capacity"), "buffer_capacity",
                fmt::format("got {}, expected 0 (no limit) or at least {}: one bucket needs a partition of each "
                            "partitioned side in memory",
                            c.buffer_capacity, least));
  }
  for (auto side : {&relation_schema::lhs, &relation_schema::rhs}) {
    std::map<std::string, std::int64_t> partitioned;
    for (const auto& r : c.relations)
      if (auto parts = c.entity(r.*side)->num_partitions; parts > 1)
        partitioned.emplace(r.*side, parts);
    auto first = partitioned.empty() ? 0 : partitioned.begin()->second;
    if (std::ranges::any_of(partitioned, [&](const auto& p) { return p.second != first; })) {
      std::vector<std::string> counts;
      for (const auto& [type, parts] : partitioned)
        counts.push_back(fmt::format("{}: {}", type, parts));
      ctx.warn(at_key("entities"), "entities",
               fmt::format("partitioned entity types on the {} side of relations have different "
                           "num_partitions ({}); training needs one count per side",
                           side == &relation_schema::lhs ? "lhs" : "rhs",
                           fmt::join(counts, ", ")));
    }
  }
}

config read_config(const toml::table& root, context& ctx) {
  config c;
  read_table(root, "", config_fields, c, ctx, root_tables);

  std::vector<std::string> entity_names;
  if (auto* n = root.get("entities"); n == nullptr) {
    ctx.error(ctx.at(root), "entities", "missing, expected at least one [entities.NAME] table");
  } else if (auto* t = n->as_table(); t == nullptr || t->empty()) {
    ctx.error(ctx.at(*n), "entities",
              fmt::format("got {}, expected at least one [entities.NAME] table",
                          t ? "no entity type" : given(*n)));
  } else {
    std::vector<std::pair<place, std::pair<std::string, entity_schema>>> found;
    for (const auto& [k, v] : *t) {
      auto path = join_path("entities", k.str());
      entity_names.emplace_back(k.str());
      if (auto* et = v.as_table()) {
        entity_schema e;
        read_table(*et, path, entity_fields, e, ctx);
        found.push_back({ctx.at(*et), {std::string(k.str()), e}});
      } else {
        ctx.error(ctx.at(v), path,
                  fmt::format("got {}, expected a table of the entity type's keys", given(v)));
      }
    }
    // toml++ sorts keys; entity types keep the order of the file.
    std::ranges::stable_sort(found, {},
                             [](const auto& f) { return std::pair{f.first.line, f.first.column}; });
    for (auto& f : found)
      c.entities.push_back(std::move(f.second));
  }

  std::vector<const toml::table*> relation_tables;
  if (auto* n = root.get("relations"); n == nullptr) {
    ctx.error(ctx.at(root), "relations", "missing, expected at least one [[relations]] table");
  } else if (auto* a = n->as_array(); a == nullptr || a->empty()) {
    ctx.error(ctx.at(*n), "relations",
              fmt::format("got {}, expected at least one [[relations]] table",
                          a ? "no relation" : given(*n)));
  } else {
    for (std::size_t i = 0; i < a->size(); ++i) {
      auto path = fmt::format("relations.{}", i);
      auto* rt = a->get_as<toml::table>(i);
      c.relations.emplace_back();
      relation_tables.push_back(rt);
      if (rt != nullptr)
        read_table(*rt, path, relation_fields, c.relations.back(), ctx);
      else
        ctx.error(ctx.at(*a->get(i)), path,
                  fmt::format("got {}, expected a table of the relation's keys", given(*a->get(i))));
    }
  }
  check_rules(c, root, relation_tables, entity_names, ctx);
  return c;
}

} // namespace

expected<loaded_config> parse_config(std::string_view text, std::string_view source_name,
                                     const std::vector<std::string>& overrides) {
  toml::table root;
  try {
    root = toml::parse(text, std::string(source_name));
  } catch (const toml::parse_error& e) {
    return fail("{}:{}:{}: invalid TOML: {}", source_name, e.source().begin.line,
                e.source().begin.column, e.description());
  }
  context ctx(source_name, overrides);
  for (std::size_t i = 0; i < overrides.size(); ++i)
    apply_override(root, i, ctx);
  auto c = read_config(root, ctx);
  if (!ctx.errors.empty())
    return fail("{}", fmt::join(sorted(std::move(ctx.errors)), "\n"));
  return loaded_config{std::move(c), sorted(std::move(ctx.warnings))};
}

expected<loaded_config> load_config(const std::filesystem::path& file,
                                    const std::vector<std::string>& overrides) {
  std::ifstream in(file, std::ios::binary);
  if (!in)
    return fail("{}: cannot read the config: {}", file.string(), std::strerror(errno));
  std::ostringstream text;
  text << in.rdbuf();
  return parse_config(text.str(), file.string(), overrides);
}

} // namespace abg
