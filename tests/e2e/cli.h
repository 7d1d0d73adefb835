// Runs the built `abg` binary the way a user does and captures what it prints.
#pragma once

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <sys/wait.h>

namespace abg::test {

struct cli_result {
  int exit_code = -1;
  std::string out, err;
};

inline std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s)
    q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

/// Runs `abg ARGS...` in `cwd` with `input` as stdin; stdout and stderr are captured separately.
inline cli_result run_abg(const std::vector<std::string>& args, const std::filesystem::path& cwd,
                          const std::filesystem::path& input = "/dev/null") {
  auto out_file = cwd / ".abg-test-stdout", err_file = cwd / ".abg-test-stderr";
  std::string cmd = "cd ";
  cmd.append(shell_quote(cwd.string())).append(" && ").append(shell_quote(ABG_BINARY));
  for (auto& a : args)
    cmd.append(" ").append(shell_quote(a));
  // Appended piecewise: GCC 12 warns falsely on `"literal" + std::string&&` at -O3.
  cmd.append(" >").append(shell_quote(out_file.string()));
  cmd.append(" 2>").append(shell_quote(err_file.string()));
  cmd.append(" <").append(shell_quote(input.string()));
  int status = std::system(cmd.c_str());
  cli_result r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  auto slurp = [](const std::filesystem::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  };
  r.out = slurp(out_file);
  r.err = slurp(err_file);
  std::filesystem::remove(out_file);
  std::filesystem::remove(err_file);
  return r;
}

/// ../shared/data/NAME beside the project, where the benchmark datasets live.
inline std::filesystem::path shared_dataset(const std::string& name) {
  return std::filesystem::path(ABG_SOURCE_DIR) / ".." / "shared" / "data" / name;
}

} // namespace abg::test
