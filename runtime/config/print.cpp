// Printing the config (to_toml, the key reference), equality and lookups: all
// driven by the field tables in fields.h.
#include <algorithm>
#include <charconv>
#include <sstream>

#include <toml++/toml.h>

#include "abg/config.h"
#include "runtime/config/fields.h"

namespace abg {

namespace config_detail {

std::string toml_text(std::int64_t v) {
  return fmt::format("{}", v);
}

std::string toml_text(double v) {
  // Shortest text that reads back to the same double; TOML needs a '.' or an
  // exponent to see a float ("inf" and "nan" are spelled as TOML spells them).
  std::array<char, 64> buf{};
  auto [end, ec] = std::to_chars(buf.data(), buf.data() + buf.size(), v);
  std::string s(buf.data(), end);
  if (s.find_first_of(".en") == std::string::npos)
    s += ".0";
  return s;
}

std::string toml_text(bool v) {
  return v ? "true" : "false";
}

std::string toml_text(std::string_view v) {
  // toml++ escapes what needs escaping; plain basic strings only, so the
  // output never depends on literal or multi-line string rules.
  std::ostringstream out;
  out << toml::toml_formatter{toml::value<std::string>{std::string(v)},
                              toml::format_flags::allow_unicode_strings};
  return std::move(out).str();
}

std::string toml_text(const std::vector<std::string>& v) {
  std::string out = "[";
  for (std::size_t i = 0; i < v.size(); ++i)
    out += (i == 0 ? "" : ", ") + toml_text(std::string_view{v[i]});
  return out + "]";
}

std::string toml_key(std::string_view name) {
  auto bare = [](char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_'
           || c == '-';
  };
  if (!name.empty() && std::ranges::all_of(name, bare))
    return std::string(name);
  return toml_text(name);
}

std::string expected_text(kind k, rule r, std::span<const std::string_view> choices) {
  if (!choices.empty())
    return fmt::format("one of {}", fmt::join(choices, ", "));
  std::string_view noun;
  switch (k) {
    case kind::integer: noun = "integer"; break;
    case kind::number: noun = "number"; break;
    case kind::boolean: return "true or false";
    case kind::string: noun = "string"; break;
    case kind::strings: return "a list of strings";
  }
  switch (r) {
    case rule::positive: return fmt::format("a positive {}", noun);
    case rule::non_negative: return fmt::format("a non-negative {}", noun);
    case rule::fraction: return "a number in [0, 1]";
    case rule::at_least_minus_one: return fmt::format("an {} >= -1", noun);
    case rule::non_empty: return fmt::format("a non-empty {}", noun);
    case rule::any: break;
  }
  return fmt::format("{} {}", k == kind::integer ? "an" : "a", noun);
}

} // namespace config_detail

namespace {

using namespace config_detail;

template <class T>
const T* present(const T& v) {
  return &v;
}

template <class T>
const T* present(const std::optional<T>& v) {
  return v ? &*v : nullptr;
}

std::string text_of(const std::string& v) {
  return toml_text(std::string_view{v});
}

template <class T>
std::string text_of(const T& v) {
  return toml_text(v);
}

template <class S, std::size_t N>
void print_fields(std::string& out, const std::array<field<S>, N>& fields, const S& s) {
  for (const auto& f : fields) {
    if (!f.section.empty())
      out += fmt::format("\n# {}\n", f.section);
    std::visit(
      [&](auto ptr) {
        if (auto* v = present(s.*ptr))
          out += fmt::format("{} = {}\n", f.name, text_of(*v));
      },
      f.ptr);
  }
}

// GCC 12 at -O3 follows the variant's unused alternatives (an optional<string>
// member pointer) into entity_schema, which is too small for one, and reports
// an out-of-bounds read that no table entry can cause.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Warray-bounds"
template <class S, std::size_t N>
void describe_fields(std::string& out, const std::array<field<S>, N>& fields) {
  static const S defaults{};
  for (const auto& f : fields) {
    std::string fallback = "none";
    std::visit(
      [&](auto ptr) {
        if (auto* v = present(defaults.*ptr))
          fallback = text_of(*v);
      },
      f.ptr);
    out += fmt::format("  {} ({}; {}){}\n      {}\n", f.name, expected_text(f),
                       f.is_required ? "required" : fmt::format("default {}", fallback),
                       f.is_extension ? " [abg]" : "", f.help);
  }
}
#pragma GCC diagnostic pop

template <class S, std::size_t N>
bool fields_equal(const std::array<field<S>, N>& fields, const S& a, const S& b) {
  return std::ranges::all_of(fields, [&](const auto& f) {
    return std::visit([&](auto ptr) { return a.*ptr == b.*ptr; }, f.ptr);
  });
}

} // namespace

std::string to_toml(const config& c) {
  std::string out = "# Effective abg config: every key, defaults filled in (none-defaults left out).\n";
  print_fields(out, config_fields, c);
  for (const auto& [name, e] : c.entities) {
    out += fmt::format("\n[entities.{}]\n", toml_key(name));
    print_fields(out, entity_fields, e);
  }
  for (const auto& r : c.relations) {
    out += "\n[[relations]]\n";
    print_fields(out, relation_fields, r);
  }
  return out;
}

std::string describe_config_keys() {
  std::string out = "Config keys (PyTorch-BigGraph's names, types and defaults; [abg] marks "
                    "abg's additions;\n\"default none\": absent unless set; see docs/config.md):\n";
  describe_fields(out, config_fields);
  out += "[entities.NAME] (one table per entity type, in file order):\n";
  describe_fields(out, entity_fields);
  out += "[[relations]] (one table per relation type; the list index is the relation id):\n";
  describe_fields(out, relation_fields);
  return out;
}

bool operator==(const entity_schema& a, const entity_schema& b) {
  return fields_equal(entity_fields, a, b);
}

bool operator==(const relation_schema& a, const relation_schema& b) {
  return fields_equal(relation_fields, a, b);
}

bool operator==(const config& a, const config& b) {
  return a.entities == b.entities && a.relations == b.relations
         && fields_equal(config_fields, a, b);
}

const entity_schema* config::entity(std::string_view name) const {
  auto i = std::ranges::find(entities, name, [](const auto& e) { return std::string_view{e.first}; });
  return i == entities.end() ? nullptr : &i->second;
}

std::int64_t config::dimension_of(std::string_view entity_name) const {
  auto* e = entity(entity_name);
  return e && e->dimension ? *e->dimension : dimension;
}

} // namespace abg
