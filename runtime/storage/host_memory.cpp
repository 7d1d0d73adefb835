#include "abg/storage/host_memory.h"

#include <algorithm>
#include <fstream>
#include <string>

#include <sys/resource.h>
#include <unistd.h>

#include "abg/units.h"

namespace abg::storage {

std::uint64_t available_memory() {
  std::ifstream in("/proc/meminfo");
  std::string key, unit;
  std::uint64_t kib = 0;
  while (in >> key >> kib >> unit)
    if (key == "MemAvailable:") return kib * 1024;
  return 0;
}

std::uint64_t resident_memory() {
  std::ifstream statm("/proc/self/statm");
  std::uint64_t size = 0, resident = 0;
  if (!(statm >> size >> resident)) return 0;
  return resident * static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
}

std::uint64_t allocation_room() {
  std::uint64_t room = available_memory();
  rlimit as{};
  if (::getrlimit(RLIMIT_AS, &as) == 0 && as.rlim_cur != RLIM_INFINITY) {
    std::ifstream statm("/proc/self/statm");
    std::uint64_t pages = 0;
    statm >> pages;
    const auto used = pages * static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
    const std::uint64_t left = as.rlim_cur > used ? as.rlim_cur - used : 1;
    room = room == 0 ? left : std::min(room, left);
  }
  return room;
}

expected<void> check_allocation(std::string_view what, std::uint64_t bytes) {
  const auto room = allocation_room();
  if (room != 0 && bytes > room)
    return fail("{} claims {} ({} bytes), more than this process can take now ({}): refused before allocating", what,
                size_text(bytes), bytes, size_text(room));
  return {};
}

} // namespace abg::storage
