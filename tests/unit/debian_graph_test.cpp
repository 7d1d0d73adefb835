// The Debian package graph converter on small hand-written dumpavail text.

#include <doctest/doctest.h>

#include <algorithm>
#include <set>
#include <string>
#include <tuple>

#include "abg/debian_graph.h"

namespace {

using abg::debian::graph;
using triple = std::tuple<std::string, std::string, std::string>;

std::set<triple> edge_set(const graph& g) {
  std::set<triple> out;
  for (const auto& e : g.edges)
    out.emplace(g.names[e.head], std::string(abg::debian::name_of(e.rel)), g.names[e.tail]);
  return out;
}

bool has(const graph& g, const std::string& head, const std::string& rel, const std::string& tail) {
  return edge_set(g).contains(triple{head, rel, tail});
}

constexpr std::string_view sample = R"(Package: editor
Version: 1.0
Architecture: amd64
Depends: libc6 (>= 2.34), libfoo1 | libfoo-compat (<< 2) [amd64], python3:any
Pre-Depends: dpkg (>= 1.17)
Recommends: Spell-Checker
Suggests: editor-doc
Enhances: shell
Conflicts: old-editor
Breaks: plugin (<< 0.5)
Replaces: old-editor
Provides: editor-virtual (= 1.0), text-editor
Description: an editor
 Depends: not-a-field
 .
 more description

Package: editor
Version: 2.0
Architecture: i386
Depends: libc6 (>= 2.36),
 libbar2:i386,
 libfoo1
Provides: text-editor

Version: 3.0
Depends: orphan-dependency

Package: other-editor
Depends: libc6
Provides: text-editor
Conflicts: text-editor
)";

} // namespace

TEST_CASE("alternative_name drops versions, architectures, profiles and :arch") {
  using abg::debian::alternative_name;
  CHECK(alternative_name(" libc6 (>= 2.34) ") == "libc6");
  CHECK(alternative_name("libfoo [amd64 !i386]") == "libfoo");
  CHECK(alternative_name("debhelper-compat (= 13) <!nocheck> <cross>") == "debhelper-compat");
  CHECK(alternative_name("python3:any (>= 3.9)") == "python3");
  CHECK(alternative_name("libbar2:i386") == "libbar2");
  CHECK(alternative_name("libc6(>=2)") == "libc6");
  CHECK(alternative_name("   ").empty());
  CHECK(alternative_name("").empty());
}

TEST_CASE("a dumpavail snippet becomes the expected edges") {
  auto g = abg::debian::parse_dumpavail(sample);

  SUBCASE("every relation field, version constraints dropped") {
    CHECK(has(g, "editor", "depends", "libc6"));
    CHECK(has(g, "editor", "pre-depends", "dpkg"));
    CHECK(has(g, "editor", "suggests", "editor-doc"));
    CHECK(has(g, "editor", "enhances", "shell"));
    CHECK(has(g, "editor", "conflicts", "old-editor"));
    CHECK(has(g, "editor", "breaks", "plugin"));
    CHECK(has(g, "editor", "replaces", "old-editor"));
    CHECK(has(g, "editor", "provides", "editor-virtual"));
    CHECK(has(g, "editor", "provides", "text-editor"));
  }
  SUBCASE("alternatives give one edge each") {
    CHECK(has(g, "editor", "depends", "libfoo1"));
    CHECK(has(g, "editor", "depends", "libfoo-compat"));
  }
  SUBCASE("architecture qualifiers are dropped and names lower-cased") {
    CHECK(has(g, "editor", "depends", "python3"));
    CHECK(has(g, "editor", "depends", "libbar2"));
    CHECK(has(g, "editor", "recommends", "spell-checker"));
    for (const auto& name : g.names) {
      CHECK(name.find(':') == std::string::npos);
      CHECK(std::none_of(name.begin(), name.end(), [](char c) { return c >= 'A' && c <= 'Z'; }));
    }
  }
  SUBCASE("continuation lines belong to the previous field") {
    CHECK(has(g, "editor", "depends", "libbar2")); // from the second stanza's continuation
    CHECK_FALSE(has(g, "editor", "depends", "not-a-field"));
    CHECK(std::find(g.names.begin(), g.names.end(), "not-a-field") == g.names.end());
  }
  SUBCASE("duplicate stanzas contribute the union of their edges, once each") {
    auto edges = edge_set(g);
    CHECK(edges.size() == g.edges.size());
    // editor: depends libc6, libfoo1, libfoo-compat, python3, libbar2; pre-depends dpkg;
    // recommends spell-checker; suggests editor-doc; enhances shell; conflicts old-editor;
    // breaks plugin; replaces old-editor; provides editor-virtual, text-editor = 14.
    // other-editor: depends libc6, provides text-editor, conflicts text-editor = 3.
    CHECK(g.edges.size() == 17);
    CHECK(g.stanzas == 3);
    CHECK(g.packages == 2);
  }
  SUBCASE("a stanza without Package: is skipped") {
    CHECK(g.skipped_stanzas == 1);
    CHECK(std::find(g.names.begin(), g.names.end(), "orphan-dependency") == g.names.end());
  }
  SUBCASE("virtual packages come from Provides") {
    CHECK(g.virtual_packages == 2); // editor-virtual, text-editor
    CHECK(has(g, "other-editor", "conflicts", "text-editor"));
    // libc6 libfoo1 libfoo-compat python3 libbar2 dpkg spell-checker editor-doc
    // shell old-editor plugin
    CHECK(g.referenced_only == 11);
    CHECK(g.entities == 2 + 2 + 11);
  }
  SUBCASE("counts per relation add up") {
    std::size_t total = 0;
    for (auto n : g.edges_per_relation)
      total += n;
    CHECK(total == g.edges.size());
    CHECK(g.edges_per_relation[static_cast<std::size_t>(abg::debian::relation::depends)] == 6);
    CHECK(g.edges_per_relation[static_cast<std::size_t>(abg::debian::relation::provides)] == 3);
  }
}

TEST_CASE("the result does not depend on how the input is cut or ordered") {
  auto whole = abg::debian::parse_dumpavail(sample);
  auto expected_tsv = abg::debian::to_tsv(whole);
  for (std::size_t piece : {std::size_t{1}, std::size_t{2}, std::size_t{7}, std::size_t{64}}) {
    abg::debian::graph_builder builder;
    for (std::size_t at = 0; at < sample.size(); at += piece)
      builder.feed(sample.substr(at, piece));
    auto g = builder.finish();
    CHECK(abg::debian::to_tsv(g) == expected_tsv);
    CHECK(g.skipped_stanzas == whole.skipped_stanzas);
  }
  // The same stanzas in another order give the same output.
  std::string reordered = "Package: other-editor\nDepends: libc6\nProvides: text-editor\n"
                          "Conflicts: text-editor\n\n";
  reordered += std::string(sample.substr(0, sample.find("Version: 3.0")));
  auto g = abg::debian::parse_dumpavail(reordered);
  CHECK(abg::debian::to_tsv(g) == expected_tsv);
}

TEST_CASE("TSV output is sorted head, relation, tail lines") {
  auto g = abg::debian::parse_dumpavail("Package: b\nDepends: z, a\nProvides: v\n\nPackage: a\nBreaks: b\n");
  CHECK(abg::debian::to_tsv(g) == "a\tbreaks\tb\n"
                                  "b\tdepends\ta\n"
                                  "b\tdepends\tz\n"
                                  "b\tprovides\tv\n");
}

TEST_CASE("odd but legal input") {
  SUBCASE("field names are case-insensitive, whitespace-only lines separate stanzas, CRLF") {
    auto g = abg::debian::parse_dumpavail("package: A\r\nDEPENDS: B\r\n \t\nPackage: c\nDepends:\n d\n");
    CHECK(g.stanzas == 2);
    CHECK(has(g, "a", "depends", "b"));
    CHECK(has(g, "c", "depends", "d"));
  }
  SUBCASE("empty alternatives and trailing commas add nothing") {
    auto g = abg::debian::parse_dumpavail("Package: a\nDepends: b, , c |, \n");
    CHECK(g.edges.size() == 2);
  }
  SUBCASE("no trailing newline, several blank lines") {
    auto g = abg::debian::parse_dumpavail("\n\n\nPackage: a\nDepends: b\n\n\n\nPackage: c\nDepends: a");
    CHECK(g.stanzas == 2);
    CHECK(g.skipped_stanzas == 0);
    CHECK(g.edges.size() == 2);
  }
  SUBCASE("empty input") {
    auto g = abg::debian::parse_dumpavail("");
    CHECK(g.stanzas == 0);
    CHECK(g.edges.empty());
  }
}
