// `abg console`'s interactive session (docs/console.md, "Interactive"), as
// a person uses it: tmux runs a 2-node loopback cluster (`abg cluster up`)
// on Kinship in 4 partitions in one pane and `abg console` in another; the
// test types views, completes `watch buckets` with Tab, watches trainers,
// presses a key, recalls a command from the history, detaches, and the run
// still ends normally. Then the same console from a pipe.
#include <doctest/doctest.h>

#include <chrono>
#include <filesystem>
#include <regex>
#include <sstream>
#include <string>

#include "tests/e2e/cli.h"
#include "tests/e2e/kinship_cluster.h"
#include "tests/e2e/tmux.h"

using namespace std::chrono_literals;
using namespace abg::test;

namespace {

// A bucket grid row as the console draws it: the lhs partition, then one
// letter per rhs partition.
bool has_grid_row_with(const std::string& screen, char letter) {
  static const std::regex row(R"(^\s+[0-3] [DT.]{4}\s*$)");
  std::istringstream in(screen);
  for (std::string line; std::getline(in, line);)
    if (std::regex_match(line, row) && line.find(letter, line.size() - 6) != std::string::npos) return true;
  return false;
}

// The seconds in the views' first line ("... 12.3 s since the coordinator started").
std::string header_seconds(const std::string& screen) {
  static const std::regex at(R"(([0-9]+\.[0-9]) s since the coordinator started)");
  std::smatch m;
  return std::regex_search(screen, m, at) ? m[1].str() : "";
}

bool contains(const std::string& screen, const std::string& text) { return screen.find(text) != std::string::npos; }

// The prompt is back below a screen that `watch` drew.
bool prompt_after_watch(const std::string& screen, const std::string& prompt) {
  const auto watched = screen.rfind("press any key to stop");
  const auto back = screen.rfind(prompt);
  return watched != std::string::npos && back != std::string::npos && back > watched;
}

} // namespace

TEST_CASE("abg console, interactively in tmux: views, Tab completion, watch until a key, history; the run ends normally") {
  if (!tmux_server::available()) {
    MESSAGE("skipped: tmux is not installed (tools/debian-packages.txt lists it)");
    return;
  }
  kinship_cluster k(600); // about 40 s here: the session ends well before the run
  const auto inspect = fmt::format("127.0.0.1:{}", free_port());
  write_cluster_file(k.dir / "c.toml", pbg_nodes(2));
  auto text = read_file(k.dir / "c.toml");
  text.insert(text.find("\n[[nodes]]"), fmt::format("\ninspect = \"{}\"", inspect));
  write_text(k.dir / "c.toml", text);

  tmux_server tmux(k.dir / "tmux.socket");
  const auto dir = shell_quote(k.dir.path().string());
  const auto abg = shell_quote(ABG_BINARY);
  REQUIRE(tmux.start("run", fmt::format("cd {} && {} cluster up c.toml kin.toml -p edge_paths=data/kin/train; echo $? "
                                        "> up.rc; sleep 600",
                                        dir, abg)));
  REQUIRE(tmux.wait_for("run:0.0", [&](const std::string& s) { return contains(s, "inspector listening on " + inspect); },
                        120s));
  // HOME in the scratch folder: the history file goes there.
  REQUIRE(tmux.split("run", fmt::format("cd {} && HOME={} {} console {}", dir, dir, abg, inspect)));
  const std::string console = "run:0.1", prompt = fmt::format("abg {}>", inspect);
  REQUIRE(tmux.wait_for(console, [&](const std::string& s) { return contains(s, prompt); }, 30s));
  CHECK(contains(tmux.screen(console), "`help` lists the views and commands"));

  // The grid, until it shows a done bucket (a new iteration starts all waiting).
  bool done_seen = false;
  for (int i = 0; i < 20 && !done_seen; ++i) {
    tmux.keys(console, "C-l");
    tmux.keys(console, "buckets Enter");
    done_seen = tmux.wait_for(console, [](const std::string& s) { return has_grid_row_with(s, 'D'); }, 2s);
  }
  INFO(tmux.screen(console));
  CHECK(done_seen);
  CHECK(contains(tmux.screen(console), "buckets done"));

  // Traffic between the two nodes, both ways.
  tmux.keys(console, "C-l traffic Enter");
  auto pair_mb = [](const std::string& screen, const std::string& from, const std::string& to) {
    std::smatch m;
    const std::regex row("\n" + from + " +" + to + " +([0-9]+\\.[0-9]+) ");
    return std::regex_search(screen, m, row) ? std::stod(m[1].str()) : -1.0;
  };
  CHECK(tmux.wait_for(console, [](const std::string& s) { return contains(s, "MB iteration"); }, 10s));
  {
    const auto screen = tmux.screen(console);
    INFO(screen);
    CHECK(pair_mb(screen, "a", "b") > 0);
    CHECK(pair_mb(screen, "b", "a") > 0);
  }

  // Tab completes the command and its view: `wat<Tab> buc<Tab>` is `watch buckets`.
  tmux.keys(console, "wat Tab buc Tab Enter");
  CHECK(tmux.wait_for(console, [](const std::string& s) { return contains(s, "watching buckets (every second)"); }, 10s));
  tmux.keys(console, "q");
  CHECK(tmux.wait_for(console, [&](const std::string& s) { return prompt_after_watch(s, prompt); }, 10s));

  // watch trainers: both trainers, redrawn every second until a key.
  tmux.keys(console, "'watch trainers' Enter");
  REQUIRE(tmux.wait_for(console, [](const std::string& s) { return contains(s, "watching trainers"); }, 10s));
  const auto first = tmux.screen(console);
  INFO(first);
  CHECK(std::regex_search(first, std::regex(R"(\n0 +a )")));
  CHECK(std::regex_search(first, std::regex(R"(\n1 +b )")));
  const auto seconds = header_seconds(first);
  CHECK_FALSE(seconds.empty());
  CHECK(tmux.wait_for(console, [&](const std::string& s) {
    return contains(s, "watching trainers") && !header_seconds(s).empty() && header_seconds(s) != seconds;
  }, 10s));
  tmux.keys(console, "x");
  CHECK(tmux.wait_for(console, [&](const std::string& s) { return prompt_after_watch(s, prompt); }, 10s));

  // The history: Up recalls `watch trainers`, Up again `watch buckets`.
  tmux.keys(console, "C-l Up Up Enter");
  CHECK(tmux.wait_for(console, [](const std::string& s) { return contains(s, "watching buckets"); }, 10s));
  tmux.keys(console, "q");
  // Read-only: a command without --admin is refused, and the run goes on.
  tmux.keys(console, "pause Enter");
  CHECK(tmux.wait_for(console, [](const std::string& s) { return contains(s, "'pause' steers the run"); }, 10s));
  tmux.keys(console, "quit Enter");
  const auto history = read_file(k.dir / ".abg_console_history");
  CHECK(contains(history, "watch trainers"));
  CHECK(contains(history, "buckets"));
  CHECK_FALSE(std::filesystem::exists(k.dir / "up.rc"));

  // The same console from a pipe: one command per line, no prompt.
  write_text(k.dir / "commands.txt", "nodes\nhelp\nbuckets\ntraffic\nno-such-view\n");
  auto piped = run_abg({"console", inspect}, k.dir.path(), k.dir / "commands.txt");
  INFO(piped.err);
  CHECK(piped.exit_code == 1); // the last command failed
  CHECK(contains(piped.out, "alive"));
  CHECK(contains(piped.out, "watch VIEW"));
  const bool grid = has_grid_row_with(piped.out, '.') || has_grid_row_with(piped.out, 'D') || has_grid_row_with(piped.out, 'T');
  CHECK(grid);
  CHECK(contains(piped.err, "no view or command 'no-such-view'"));
  CHECK_FALSE(contains(piped.out, prompt));

  // The run was never disturbed: it ends normally.
  REQUIRE(tmux.wait_for("run:0.0", [&](const std::string&) { return std::filesystem::exists(k.dir / "up.rc"); }, 300s));
  INFO(tmux.screen("run:0.0"));
  CHECK(read_file(k.dir / "up.rc") == "0\n");
}
