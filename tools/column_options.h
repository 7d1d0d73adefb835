// The column options `abg import` and `abg score` share: same names, same
// defaults, so a file that imports also scores with the same flags.
#pragma once

#include <string>

#include <CLI/CLI.hpp>

#include "abg/edge_lines.h"

namespace abg::tools {

struct column_args {
  std::string delimiter = "\\t"; // as typed; parse_delimiter turns it into edge_columns::delimiter
  bool skip_header = false;
};

/// Adds --lhs-col and --rhs-col (required), --rel-col, --delimiter and
/// --skip-header to `cmd`, writing into `columns` and `args`.
void add_column_args(CLI::App& cmd, edge_columns& columns, column_args& args);

/// Sets columns.delimiter from args.delimiter and checks the columns.
expected<void> finish_columns(edge_columns& columns, const column_args& args);

} // namespace abg::tools
