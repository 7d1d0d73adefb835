// Whether a cluster file's host is this machine: loopback, this machine's
// name, or an address of one of its interfaces.
#pragma once

#include <string>

namespace abg::tools {

bool is_local_host(const std::string& host);

} // namespace abg::tools
