// Included first in every fuzz build unit: Cap'n Proto 0.9's headers compare a
// C string with kj::StringPtr, an operator kj drops under C++20 expecting the
// rewritten candidate, which clang 16 does not take (g++ 12 does). The
// operator it drops, back for clang.
#pragma once

#include <kj/string.h>

namespace kj {
inline bool operator==(const char* a, const StringPtr& b) { return b == a; }
} // namespace kj
