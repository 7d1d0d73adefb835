// How much memory this process may still take, for checks made before a
// large allocation that a peer or a file asked for: a claimed size beyond
// it is refused with an error naming the size, instead of an allocation
// failing (or the kernel's OOM killer) later.
#pragma once

#include <cstdint>
#include <string_view>

#include "abg/error.h"

namespace abg::storage {

/// MemAvailable of /proc/meminfo in bytes (0 where there is none).
std::uint64_t available_memory();

/// This process's resident set in bytes (0 where /proc has none).
std::uint64_t resident_memory();

/// Room for one more allocation: available_memory(), and within RLIMIT_AS
/// what the address space has left; 0 when neither is known.
std::uint64_t allocation_room();

/// Refuses `bytes` for `what` when they exceed allocation_room().
expected<void> check_allocation(std::string_view what, std::uint64_t bytes);

} // namespace abg::storage
