#include "tools/column_options.h"

namespace abg::tools {

void add_column_args(CLI::App& cmd, edge_columns& columns, column_args& args) {
  cmd.add_option("--lhs-col", columns.lhs_col, "0-based column of the head (lhs) entity")->required();
  cmd.add_option("--rhs-col", columns.rhs_col, "0-based column of the tail (rhs) entity")->required();
  cmd.add_option("--rel-col", columns.rel_col,
                 "0-based column of the relation name (without it every edge has relation 0)");
  cmd.add_option("--delimiter", args.delimiter, "Field separator: one character, \\t, tab or space")
    ->capture_default_str();
  cmd.add_flag("--skip-header", args.skip_header, "Skip the first line of each input file");
}

expected<void> finish_columns(edge_columns& columns, const column_args& args) {
  auto delimiter = parse_delimiter(args.delimiter);
  if (!delimiter)
    return std::unexpected(delimiter.error());
  columns.delimiter = *delimiter;
  return columns.check();
}

} // namespace abg::tools
