// `abg console`'s interactive session (docs/console.md, "Interactive"): a
// prompt with readline's line editing, history and tab completion; the
// views, `watch VIEW` (redrawn every second until a key is pressed),
// `help`, and with --admin the commands. Without a terminal on standard
// input it reads one command per line from it, so a session can be piped.
#pragma once

#include <array>
#include <functional>
#include <string>
#include <string_view>

#include "abg/error.h"

namespace abg::tools {

/// What a console may send with --admin (docs/console.md, "Steering a run").
constexpr std::array<std::string_view, 4> console_commands{"pause", "resume", "checkpoint", "stop"};

bool is_console_command(std::string_view word);

struct console_session {
  /// The inspector's JSON document of a view, or why not.
  std::function<expected<std::string>(const std::string& view)> view;
  /// Sends an admin command, or why not; empty when not attached with --admin.
  std::function<expected<std::string>(const std::string& command)> command;
  std::string prompt;       // e.g. "abg 127.0.0.1:4000> "
  bool json = false;        // print the views' JSON documents, not their text
  std::string history_file; // empty: this session's history only
};

/// Does one line: a view, `watch VIEW`, `help` or a command, printed (in
/// colour when `colour`); the exit status (0, or 1 when it failed, the error
/// printed). `abg console --exec` is one such line.
int run_console_line(const console_session& session, const std::string& line, bool colour);

/// Runs until `quit`, the end of input or Ctrl-D; the exit status (0, or 1
/// when the last command failed).
int run_console_session(const console_session& session);

} // namespace abg::tools
