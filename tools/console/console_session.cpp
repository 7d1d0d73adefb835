#include "tools/console/console_session.h"

#include <poll.h>
#include <sys/stat.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <optional>
#include <sstream>
#include <vector>

// readline's headers use FILE without including <cstdio> themselves.
#include <readline/history.h>
#include <readline/readline.h>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "messages/views.h"
#include "tools/console/console_render.h"

namespace abg::tools {

bool is_console_command(std::string_view word) {
  return std::find(console_commands.begin(), console_commands.end(), word) != console_commands.end();
}

namespace {

constexpr std::string_view help_text =
  "views (read-only):\n"
  "  nodes        the nodes: state, address, when last heard from, resident memory, bytes held, roles\n"
  "  buckets      this iteration's bucket grid: D done, T training, . waiting\n"
  "  partitions   each partition: its size, the partition servers storing it, the trainers holding it, versions\n"
  "  params       each parameter-server shard: parameters held, pushes and pulls (per second), bytes\n"
  "  trainers     each trainer: state, its bucket, this iteration's buckets, edges/s, loss\n"
  "  traffic      bytes each node sent and received by purpose, and per node pair, in total and this iteration\n"
  "  events       what happened: nodes joined and lost, buckets re-queued, commits, epochs\n"
  "  log          the run's log: the last lines of every node, in time order\n"
  "  watch VIEW   redraw VIEW every second until a key is pressed\n"
  "commands (attached with --admin only):\n"
  "  pause        hand out no bucket; the buckets being trained finish\n"
  "  resume       hand out buckets again\n"
  "  checkpoint   commit a checkpoint version now (mid-iteration)\n"
  "  stop         commit, then end the run (exit status 0 on every node)\n"
  "  help         this text\n"
  "  quit         detach (also Ctrl-D); the run goes on\n";

// Completion reads the session's words from here: readline's callbacks take
// no context.
const console_session* completing = nullptr;

std::vector<std::string> candidates(bool first_word, std::string_view line) {
  std::vector<std::string> out;
  const auto& views = msg::views;
  if (first_word) {
    for (auto v : views) out.emplace_back(v);
    for (auto w : {"watch", "help", "quit"}) out.emplace_back(w);
    if (completing && completing->command)
      for (auto c : console_commands) out.emplace_back(c);
  } else if (line.starts_with("watch ")) {
    for (auto v : views) out.emplace_back(v);
  }
  return out;
}

char* next_match(const char* text, int state) {
  static std::vector<std::string> matches;
  static std::size_t next = 0;
  if (state == 0) {
    matches.clear();
    next = 0;
    const std::string_view line(rl_line_buffer, static_cast<std::size_t>(rl_point));
    const bool first = line.find_first_not_of(' ') == std::string_view::npos ||
                       line.find(' ', line.find_first_not_of(' ')) == std::string_view::npos;
    for (auto& c : candidates(first, line.substr(std::min(line.size(), line.find_first_not_of(' ')))))
      if (c.starts_with(text)) matches.push_back(std::move(c));
  }
  return next < matches.size() ? strdup(matches[next++].c_str()) : nullptr;
}

char** complete(const char* text, int, int) {
  rl_attempted_completion_over = 1; // words only, never file names
  return rl_completion_matches(text, next_match);
}

bool colour_terminal() {
  const char* term = std::getenv("TERM");
  return ::isatty(STDOUT_FILENO) && term && std::string_view(term) != "dumb" && !std::getenv("NO_COLOR");
}

std::vector<std::string> words_of(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

// The view as the session prints it, or why not.
expected<std::string> shown(const console_session& s, const std::string& view, bool colour) {
  auto doc = s.view(view);
  if (!doc) return std::unexpected(doc.error());
  if (s.json) return *doc + "\n";
  auto parsed = nlohmann::json::parse(*doc, nullptr, false);
  return parsed.is_discarded() ? *doc + "\n" : render_view(parsed, colour);
}

// Keys arrive one by one, unechoed, while watching; restored however it ends.
struct raw_keys {
  termios saved{};
  bool on = false;
  raw_keys() {
    on = ::tcgetattr(STDIN_FILENO, &saved) == 0;
    if (!on) return;
    auto raw = saved;
    raw.c_lflag &= ~static_cast<tcflag_t>(ICANON | ECHO);
    raw.c_cc[VMIN] = 1;
    raw.c_cc[VTIME] = 0;
    ::tcsetattr(STDIN_FILENO, TCSANOW, &raw);
  }
  ~raw_keys() {
    if (on) ::tcsetattr(STDIN_FILENO, TCSANOW, &saved);
  }
  raw_keys(const raw_keys&) = delete;
  raw_keys& operator=(const raw_keys&) = delete;
};

// Whether a key was pressed within `ms` (and takes it).
bool key_within(int ms) {
  pollfd p{STDIN_FILENO, POLLIN, 0};
  const int n = ::poll(&p, 1, ms);
  if (n <= 0) return false; // a signal (a resized terminal) just redraws sooner
  char c;
  return ::read(STDIN_FILENO, &c, 1) >= 0;
}

int watch(const console_session& s, const std::string& view, bool colour) {
  if (!::isatty(STDIN_FILENO)) {
    fmt::print(stderr, "error: watch needs a terminal to wait for a key on; without one, repeat `{}`\n", view);
    return 1;
  }
  raw_keys keys;
  for (;;) {
    auto text = shown(s, view, colour);
    if (!text) {
      fmt::print(stderr, "\nerror: {}\n", text.error().message);
      return 1;
    }
    fmt::print("\033[H\033[2J{}\nwatching {} (every second): press any key to stop\n", *text, view);
    std::fflush(stdout);
    if (key_within(1000)) return 0;
  }
}

} // namespace

int run_console_line(const console_session& s, const std::string& line, bool colour) {
  const auto words = words_of(line);
  if (words.empty()) {
    fmt::print(stderr, "error: no command (help lists them)\n");
    return 1;
  }
  const auto& head = words.front();
  const auto& views = msg::views;
  const bool is_view = std::find(views.begin(), views.end(), head) != views.end();
  if (head == "help") {
    fmt::print("{}", help_text);
    return 0;
  }
  if (head == "watch") {
    if (words.size() != 2 || std::find(views.begin(), views.end(), words[1]) == views.end()) {
      fmt::print(stderr, "error: watch VIEW, where VIEW is one of {}\n", fmt::join(views, ", "));
      return 1;
    }
    return watch(s, words[1], colour);
  }
  if (words.size() > 1) {
    fmt::print(stderr, "error: '{}' takes no arguments (help lists the commands)\n", head);
    return 1;
  }
  if (is_view) {
    auto text = shown(s, head, colour);
    if (!text) {
      fmt::print(stderr, "error: {}\n", text.error().message);
      return 1;
    }
    fmt::print("{}", *text);
    return 0;
  }
  if (is_console_command(head)) {
    if (!s.command) {
      fmt::print(stderr,
                 "error: '{}' steers the run: attach with --admin and the run's admin token file; without it a "
                 "console only reads\n",
                 head);
      return 1;
    }
    auto done = s.command(head);
    if (!done) {
      fmt::print(stderr, "error: {}\n", done.error().message);
      return 1;
    }
    fmt::print("{}\n", s.json ? nlohmann::json{{"command", head}, {"result", *done}}.dump() : *done);
    return 0;
  }
  fmt::print(stderr, "error: no view or command '{}' (the views: {}; help lists the commands)\n", head,
             fmt::join(views, ", "));
  return 1;
}

int run_console_session(const console_session& s) {
  const bool terminal = ::isatty(STDIN_FILENO);
  const bool colour = colour_terminal();
  if (terminal) {
    completing = &s;
    rl_attempted_completion_function = complete;
    rl_readline_name = "abg";
    if (!s.history_file.empty()) ::read_history(s.history_file.c_str());
    fmt::print("attached; `help` lists the views and commands, `quit` detaches\n");
  }
  int code = 0;
  for (;;) {
    std::string line;
    if (terminal) {
      char* read = ::readline(s.prompt.c_str());
      if (!read) break; // Ctrl-D
      line = read;
      std::free(read);
    } else if (!std::getline(std::cin, line)) {
      break;
    }
    if (words_of(line).empty()) continue;
    if (terminal) {
      ::add_history(line.c_str());
      if (!s.history_file.empty()) {
        // Written as it goes, so that a console that dies keeps what it had.
        if (::append_history(1, s.history_file.c_str()) != 0) ::write_history(s.history_file.c_str());
        ::chmod(s.history_file.c_str(), 0600);
        ::history_truncate_file(s.history_file.c_str(), 1000);
      }
    }
    const auto head = words_of(line).front();
    if (head == "quit" || head == "exit") break;
    code = run_console_line(s, line, colour);
    std::fflush(stdout);
  }
  if (terminal) fmt::print("\n");
  completing = nullptr;
  return code;
}

} // namespace abg::tools
