#include "abg/debian_graph.h"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <stdexcept>

namespace abg::debian {

namespace {

bool is_blank(char c) { return c == ' ' || c == '\t' || c == '\r'; }

bool is_space(char c) { return is_blank(c) || c == '\n'; }

char lower(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; }

/// ASCII case-insensitive equality of a field name with a lower-case one.
bool field_is(std::string_view field, std::string_view lower_name) {
  if (field.size() != lower_name.size())
    return false;
  for (std::size_t i = 0; i < field.size(); ++i)
    if (lower(field[i]) != lower_name[i])
      return false;
  return true;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && is_space(s.front()))
    s.remove_prefix(1);
  while (!s.empty() && is_space(s.back()))
    s.remove_suffix(1);
  return s;
}

constexpr std::uint64_t pack(std::uint32_t head, relation rel, std::uint32_t tail) {
  return (std::uint64_t{head} << 36) | (std::uint64_t{static_cast<std::uint8_t>(rel)} << 32) |
         std::uint64_t{tail};
}

} // namespace

std::string_view alternative_name(std::string_view alternative) {
  std::size_t begin = 0;
  while (begin < alternative.size() && is_space(alternative[begin]))
    ++begin;
  std::size_t end = begin;
  while (end < alternative.size()) {
    char c = alternative[end];
    if (is_space(c) || c == '(' || c == '[' || c == '<' || c == ',' || c == '|' || c == ':')
      break;
    ++end;
  }
  return alternative.substr(begin, end - begin);
}

std::uint32_t graph_builder::intern(std::string_view raw_name) {
  std::string lowered;
  std::string_view name = raw_name;
  if (std::any_of(raw_name.begin(), raw_name.end(), [](char c) { return c >= 'A' && c <= 'Z'; })) {
    lowered.resize(raw_name.size());
    std::transform(raw_name.begin(), raw_name.end(), lowered.begin(), lower);
    name = lowered;
  }
  if (auto it = ids_.find(name); it != ids_.end())
    return it->second;
  if (names_.size() >= (std::size_t{1} << 28))
    throw std::length_error("debian graph: more than 2^28 distinct package names");
  auto id = static_cast<std::uint32_t>(names_.size());
  const std::string& stored = names_.emplace_back(name);
  ids_.emplace(std::string_view(stored), id);
  is_package_.push_back(0);
  is_provided_.push_back(0);
  return id;
}

void graph_builder::add_relationship_field(relation rel, std::string_view value) {
  std::uint32_t head = intern(package_);
  // Alternatives and comma-separated entries are treated alike: every
  // alternative is an edge of its own. Neither ',' nor '|' can occur inside
  // a version constraint, an architecture list or a build profile.
  std::size_t start = 0;
  while (start <= value.size()) {
    std::size_t stop = start;
    while (stop < value.size() && value[stop] != ',' && value[stop] != '|')
      ++stop;
    std::string_view name = alternative_name(value.substr(start, stop - start));
    if (!name.empty()) {
      std::uint32_t tail = intern(name);
      if (rel == relation::provides)
        is_provided_[tail] = 1;
      raw_edges_.push_back(pack(head, rel, tail));
    }
    start = stop + 1;
  }
}

void graph_builder::end_stanza() {
  package_ = trim(package_);
  if (has_package_ && !package_.empty()) {
    ++stanzas_;
    is_package_[intern(package_)] = 1;
    for (std::size_t r = 0; r < relation_count; ++r)
      if (field_seen_[r])
        add_relationship_field(static_cast<relation>(r), fields_[r]);
  } else {
    ++skipped_stanzas_;
  }
  package_ = {};
  has_package_ = false;
  field_seen_ = {};
  fields_ = {};
}

void graph_builder::parse_stanzas(std::string_view text) {
  // Field being collected, so that continuation lines can extend it.
  std::string_view* current = nullptr;
  bool in_stanza = false;
  std::size_t pos = 0;
  const char* base = text.data();
  while (pos < text.size()) {
    const void* nl = std::memchr(base + pos, '\n', text.size() - pos);
    std::size_t eol = nl ? static_cast<std::size_t>(static_cast<const char*>(nl) - base) : text.size();
    std::string_view line = text.substr(pos, eol - pos);
    std::size_t next = eol + 1;

    std::size_t first = 0;
    while (first < line.size() && is_blank(line[first]))
      ++first;
    if (first == line.size()) { // empty or whitespace-only: ends the stanza
      if (in_stanza)
        end_stanza();
      in_stanza = false;
      current = nullptr;
    } else if (first > 0) { // continuation line: part of the previous field
      if (current != nullptr) {
        // The field's value runs on to the end of this line; the buffer is
        // contiguous, so the newline in between is just whitespace.
        const char* value_begin = current->data();
        *current = std::string_view(value_begin, static_cast<std::size_t>(base + eol - value_begin));
      }
    } else {
      in_stanza = true;
      current = nullptr;
      std::size_t colon = line.find(':');
      if (colon != std::string_view::npos) {
        std::string_view field = line.substr(0, colon);
        std::size_t value_begin = colon + 1;
        while (value_begin < line.size() && is_blank(line[value_begin]))
          ++value_begin;
        std::string_view value = line.substr(value_begin);
        if (field_is(field, "package")) {
          package_ = value;
          has_package_ = true;
          current = &package_;
        } else {
          for (std::size_t r = 0; r < relation_count; ++r) {
            if (field_is(field, relation_names[r])) {
              fields_[r] = value;
              field_seen_[r] = true;
              current = &fields_[r];
              break;
            }
          }
        }
      }
    }
    pos = next;
  }
  if (in_stanza)
    end_stanza();
}

void graph_builder::feed(std::string_view chunk) {
  pending_.append(chunk);
  // Parse every complete stanza; keep the unfinished one for the next piece.
  std::size_t cut = pending_.rfind("\n\n");
  if (cut == std::string::npos)
    return;
  std::string_view complete(pending_.data(), cut + 1);
  parse_stanzas(complete);
  pending_.erase(0, cut + 2);
}

graph graph_builder::finish() {
  if (!pending_.empty())
    parse_stanzas(pending_);
  pending_.clear();
  pending_.shrink_to_fit();

  graph g;
  g.stanzas = stanzas_;
  g.skipped_stanzas = skipped_stanzas_;

  // Renumber entities in name order, so the output is sorted and the same
  // whatever the order of the input's stanzas.
  const std::size_t n = names_.size();
  std::vector<std::uint32_t> order(n);
  std::iota(order.begin(), order.end(), std::uint32_t{0});
  std::sort(order.begin(), order.end(),
            [&](std::uint32_t a, std::uint32_t b) { return names_[a] < names_[b]; });
  std::vector<std::uint32_t> rank(n);
  g.names.reserve(n);
  for (std::uint32_t r = 0; r < n; ++r) {
    rank[order[r]] = r;
    g.names.push_back(std::move(names_[order[r]]));
  }

  for (auto& e : raw_edges_) {
    auto head = static_cast<std::uint32_t>(e >> 36);
    auto rel = static_cast<relation>((e >> 32) & 0xf);
    auto tail = static_cast<std::uint32_t>(e & 0xffffffffu);
    e = pack(rank[head], rel, rank[tail]);
  }
  std::sort(raw_edges_.begin(), raw_edges_.end());
  raw_edges_.erase(std::unique(raw_edges_.begin(), raw_edges_.end()), raw_edges_.end());

  std::vector<std::uint8_t> in_edges(n, 0);
  g.edges.reserve(raw_edges_.size());
  for (auto e : raw_edges_) {
    edge out{static_cast<std::uint32_t>(e >> 36), static_cast<relation>((e >> 32) & 0xf),
             static_cast<std::uint32_t>(e & 0xffffffffu)};
    ++g.edges_per_relation[static_cast<std::size_t>(out.rel)];
    in_edges[out.head] = 1;
    in_edges[out.tail] = 1;
    g.edges.push_back(out);
  }
  for (std::size_t old_id = 0; old_id < n; ++old_id) {
    bool package = is_package_[old_id] != 0;
    bool provided = is_provided_[old_id] != 0;
    if (package)
      ++g.packages;
    else if (provided)
      ++g.virtual_packages;
    else if (in_edges[rank[old_id]])
      ++g.referenced_only;
    if (in_edges[rank[old_id]])
      ++g.entities;
  }

  *this = graph_builder{};
  return g;
}

graph parse_dumpavail(std::string_view text) {
  graph_builder builder;
  builder.feed(text);
  return builder.finish();
}

std::string to_tsv(const graph& g) {
  std::size_t size = 0;
  for (const auto& e : g.edges)
    size += g.names[e.head].size() + name_of(e.rel).size() + g.names[e.tail].size() + 3;
  std::string out;
  out.reserve(size);
  for (const auto& e : g.edges) {
    out += g.names[e.head];
    out += '\t';
    out += name_of(e.rel);
    out += '\t';
    out += g.names[e.tail];
    out += '\n';
  }
  return out;
}

} // namespace abg::debian
