// abg's version (the project's, from CMakeLists.txt): nodes of one cluster
// must run the same one.
#pragma once

#include <string_view>

namespace abg {

#ifndef ABG_VERSION
#error "ABG_VERSION is set by the build (CMakeLists.txt)"
#endif
inline constexpr std::string_view abg_version = ABG_VERSION;

} // namespace abg
