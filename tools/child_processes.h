// Child processes whose output is relayed line by line with a prefix, and
// who get the signals the parent gets (`abg cluster up`).
#pragma once

#include <string>
#include <vector>

namespace abg::tools {

struct child_spec {
  std::string label;             // printed as "[label] " before each line
  std::vector<std::string> argv; // argv[0] is the program's path
};

/// Starts every child with stdout and stderr into one pipe each, relays
/// their lines to stderr prefixed with "[label] " (a line that already
/// starts with it is passed as it is), forwards SIGINT and SIGTERM, and
/// waits for all. Returns the worst exit status: the highest, 128 + the
/// signal for a child killed by one; 1 when a child cannot be started.
int run_children(const std::vector<child_spec>& children);

} // namespace abg::tools
