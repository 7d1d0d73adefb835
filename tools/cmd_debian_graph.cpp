// `abg debian-graph`: converts the package lists (`apt-cache dumpavail`) into a
// head<TAB>relation<TAB>tail edge list, the main job's default data.
// The parsing rules live in runtime/import/debian_graph.cpp.

#include "tools/commands.h"

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <sys/wait.h>

#include <fmt/core.h>

#include "abg/debian_graph.h"
#include "abg/error.h"
#include "abg/storage/files.h"

namespace abg::tools {

namespace {

constexpr std::size_t read_chunk = std::size_t{4} << 20;

struct debian_graph_options {
  std::string input;
  std::string output = "-";
};

/// Feeds everything `in` yields to the builder; false on a read error.
bool feed_all(std::FILE* in, debian::graph_builder& builder) {
  std::vector<char> buffer(read_chunk);
  while (true) {
    std::size_t n = std::fread(buffer.data(), 1, buffer.size(), in);
    if (n > 0)
      builder.feed(std::string_view(buffer.data(), n));
    if (n < buffer.size())
      return std::ferror(in) == 0;
  }
}

expected<debian::graph> read_graph(const std::string& input) {
  debian::graph_builder builder;
  if (input.empty()) {
    std::FILE* pipe = ::popen("apt-cache dumpavail", "r");
    if (pipe == nullptr)
      return fail("cannot run 'apt-cache dumpavail': {}", std::strerror(errno));
    bool ok = feed_all(pipe, builder);
    int status = ::pclose(pipe);
    if (!ok)
      return fail("reading the output of 'apt-cache dumpavail' failed");
    if (status == -1 || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
      return fail("'apt-cache dumpavail' failed (status {}); is apt installed? "
                  "(pass --input FILE to read a saved copy instead)",
                  WIFEXITED(status) ? WEXITSTATUS(status) : status);
  } else if (input == "-") {
    if (!feed_all(stdin, builder))
      return fail("reading standard input failed: {}", std::strerror(errno));
  } else {
    std::unique_ptr<std::FILE, int (*)(std::FILE*)> file(std::fopen(input.c_str(), "rb"), &std::fclose);
    if (!file)
      return fail("cannot open '{}': {}", input, std::strerror(errno));
    if (!feed_all(file.get(), builder))
      return fail("reading '{}' failed: {}", input, std::strerror(errno));
  }
  return builder.finish();
}

int run_debian_graph(const debian_graph_options& options) {
  auto start = std::chrono::steady_clock::now();
  auto graph = read_graph(options.input);
  if (!graph) {
    fmt::print(stderr, "abg debian-graph: {}\n", graph.error().message);
    return 1;
  }
  const std::string source = options.input.empty() ? "'apt-cache dumpavail'"
                             : options.input == "-" ? "standard input"
                                                    : "'" + options.input + "'";
  if (graph->stanzas == 0) {
    fmt::print(stderr,
               "abg debian-graph: no package stanza in {}; are the package lists empty? "
               "(run 'apt-get update' first)\n",
               source);
    return 1;
  }

  std::string tsv = debian::to_tsv(*graph);
  if (options.output == "-") {
    if (std::fwrite(tsv.data(), 1, tsv.size(), stdout) != tsv.size() || std::fflush(stdout) != 0) {
      fmt::print(stderr, "abg debian-graph: writing to standard output failed: {}\n", std::strerror(errno));
      return 1;
    }
  } else {
    std::filesystem::path out(options.output);
    if (out.has_parent_path()) {
      std::error_code ec;
      std::filesystem::create_directories(out.parent_path(), ec);
      if (ec) {
        fmt::print(stderr, "abg debian-graph: cannot create '{}': {}\n", out.parent_path().string(),
                   ec.message());
        return 1;
      }
    }
    if (auto written = storage::write_file_atomic(out, tsv); !written) {
      fmt::print(stderr, "abg debian-graph: {}\n", written.error().message);
      return 1;
    }
  }

  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const auto& g = *graph;
  fmt::print(stderr, "abg debian-graph: read {} stanzas from {}", g.stanzas, source);
  if (g.skipped_stanzas > 0)
    fmt::print(stderr, " (skipped {} without a Package: field)", g.skipped_stanzas);
  fmt::print(stderr, "\n");
  fmt::print(stderr,
             "  packages:         {:>8} (distinct Package: names)\n"
             "  virtual packages: {:>8} (named in Provides: only)\n"
             "  other names:      {:>8} (only named in other relationship fields)\n"
             "  entities:         {:>8} (names in at least one edge)\n"
             "  edges:            {:>8}\n",
             g.packages, g.virtual_packages, g.referenced_only, g.entities, g.edges.size());
  for (std::size_t r = 0; r < debian::relation_count; ++r)
    fmt::print(stderr, "    {:<16}{:>8}\n", debian::relation_names[r], g.edges_per_relation[r]);
  fmt::print(stderr, "  wrote {} in {:.2f} s\n",
             options.output == "-" ? std::string("standard output") : "'" + options.output + "'", seconds);
  return 0;
}

} // namespace

void register_debian_graph_command(CLI::App& app) {
  auto options = std::make_shared<debian_graph_options>();
  auto* cmd = app.add_subcommand(
      "debian-graph",
      "Convert the Debian package graph ('apt-cache dumpavail') to a head<TAB>relation<TAB>tail edge "
      "list.");
  cmd->footer(
      "Entities are packages and virtual packages: the names in Package:, in Provides: and in the\n"
      "relationship fields, lower-cased, without ':arch' qualifiers. Relations are the fields\n"
      "depends, pre-depends, recommends, suggests, enhances, conflicts, breaks, replaces and\n"
      "provides (head = the stanza's package, tail = the named package).\n"
      "  - alternatives 'a | b' give one edge per alternative;\n"
      "  - version constraints '(>= 1.2)', architecture restrictions '[amd64]' and build\n"
      "    profiles '<!nocheck>' are dropped;\n"
      "  - a package listed in several stanzas (versions, architectures) contributes the union of\n"
      "    its edges, each edge once; stanzas without a Package: field are skipped.\n"
      "The output is sorted by head, relation, tail. Counts (packages, entities, edges per\n"
      "relation) go to standard error. See docs/debian-graph.md.\n"
      "Example: abg debian-graph --output data/debian/edges.tsv");
  cmd->add_option("--input,-i", options->input,
                  "dumpavail text to read: a file, or '-' for standard input "
                  "(default: run 'apt-cache dumpavail')")
      ->type_name("FILE");
  cmd->add_option("--output,-o", options->output,
                  "TSV file to write (atomically, creating its directory), or '-' for standard output")
      ->type_name("TSV")
      ->capture_default_str();
  cmd->callback([options] { exit_code() = run_debian_graph(*options); });
}

} // namespace abg::tools
