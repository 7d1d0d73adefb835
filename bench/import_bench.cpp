// Import throughput: generates a TSV (default 10M edges, 1M distinct entity
// names, 8 relation names), imports it with the `abg` binary into 4x4 buckets
// (dynamic relations), and reports the whole run's edges/s and peak RSS.
// Appends a line to the results file with the command that produced it.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

namespace fs = std::filesystem;

namespace {

void generate(const fs::path& file, std::uint64_t edges, std::uint64_t entities, int relations) {
  std::mt19937_64 rng(42);
  std::FILE* out = std::fopen(file.c_str(), "wb");
  if (!out)
    throw std::runtime_error("cannot create " + file.string());
  std::string buffer;
  for (std::uint64_t i = 0; i < edges; ++i) {
    fmt::format_to(std::back_inserter(buffer), "user_{:07}\trelation_{}\titem_{:07}\n", rng() % entities,
                   rng() % static_cast<std::uint64_t>(relations), rng() % entities);
    if (buffer.size() > (1 << 20)) {
      std::fwrite(buffer.data(), 1, buffer.size(), out);
      buffer.clear();
    }
  }
  std::fwrite(buffer.data(), 1, buffer.size(), out);
  std::fclose(out);
}

} // namespace

int main(int argc, char** argv) {
  CLI::App app{"abg import benchmark"};
  std::uint64_t edges = 10'000'000, entities = 500'000;
  int relations = 8, partitions = 4;
  std::string abg = "build/abg", work = "out/bench-import", results = "bench/results.md";
  app.add_option("--edges", edges, "Edges to generate")->capture_default_str();
  app.add_option("--entities", entities,
                 "Distinct names per side (user_N and item_N: twice this many entity names in all)")
    ->capture_default_str();
  app.add_option("--relations", relations, "Distinct relation names")->capture_default_str();
  app.add_option("--partitions", partitions, "Partitions of the entity type")->capture_default_str();
  app.add_option("--abg", abg, "The abg binary")->capture_default_str();
  app.add_option("--work", work, "Work directory (the generated TSV is kept for later runs)")->capture_default_str();
  app.add_option("--results", results, "Results file to append to")->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  fs::create_directories(work);
  auto tsv = fs::path(work) / fmt::format("edges_{}_{}_{}.tsv", edges, entities, relations);
  if (!fs::exists(tsv)) {
    fmt::print(stderr, "generating {} ...\n", tsv.string());
    generate(tsv, edges, entities, relations);
  }
  auto config = fs::path(work) / "bench.toml";
  std::ofstream(config) << fmt::format(R"(entity_path = "{0}/entities"
edge_paths = ["{0}/edges"]
checkpoint_path = "{0}/model"
dimension = 100
dynamic_relations = true
[entities.all]
num_partitions = {1}
[[relations]]
name = "all_edges"
lhs = "all"
rhs = "all"
)",
                                       fs::absolute(work).string(), partitions);
  fs::remove_all(fs::path(work) / "entities");
  fs::remove_all(fs::path(work) / "edges");

  std::vector<std::string> args{abg, "import", config.string(), tsv.string(), "--lhs-col", "0", "--rel-col", "1",
                                "--rhs-col", "2"};
  auto start = std::chrono::steady_clock::now();
  pid_t pid = fork();
  if (pid == 0) {
    std::vector<char*> argv_child;
    for (auto& a : args)
      argv_child.push_back(a.data());
    argv_child.push_back(nullptr);
    execv(argv_child[0], argv_child.data());
    _exit(127);
  }
  int status = 0;
  rusage usage{};
  wait4(pid, &status, 0, &usage);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    fmt::print(stderr, "abg import failed (status {})\n", status);
    return 1;
  }
  double rate = static_cast<double>(edges) / seconds;
  double rss_mib = static_cast<double>(usage.ru_maxrss) / 1024.0;
  auto line = fmt::format("import: {} edges, {} entity names, {} relations, {}x{} buckets: {:.2f} s, {:.0f} "
                          "edges/s, peak RSS {:.0f} MiB",
                          edges, 2 * entities, relations, partitions, partitions, seconds, rate, rss_mib);
  fmt::print("{}\n", line);
  std::string command;
  for (int i = 0; i < argc; ++i)
    command += (i ? " " : "") + std::string(argv[i]);
  std::ofstream(results, std::ios::app) << fmt::format("- {} (`{}`)\n", line, command);
  return 0;
}
