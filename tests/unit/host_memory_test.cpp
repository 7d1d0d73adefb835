// Claimed sizes checked before allocating (abg/storage/host_memory.h), also
// under an address-space limit (RLIMIT_AS), in a child process so that the
// limit stays there.
#include <doctest/doctest.h>

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "abg/storage/host_memory.h"

TEST_CASE("a claimed size beyond what this process may take is refused, naming it, before allocating") {
  auto huge = abg::storage::check_allocation("a put of partition x/0", std::uint64_t{1} << 38);
  if (abg::storage::allocation_room() < (std::uint64_t{1} << 38)) {
    REQUIRE_FALSE(huge);
    CHECK(huge.error().message.find("a put of partition x/0 claims 256.0 GiB") != std::string::npos);
  }
  CHECK(abg::storage::check_allocation("a small thing", 4096));
  // Under RLIMIT_AS = 1 GiB, 2 GiB is refused although the machine may have
  // it, and a claim of 2^36 floats gets the error, not std::bad_alloc.
  pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    rlimit one_gib{std::uint64_t{1} << 30, std::uint64_t{1} << 30};
    if (::setrlimit(RLIMIT_AS, &one_gib) != 0) ::_exit(3);
    auto two = abg::storage::check_allocation("two", std::uint64_t{2} << 30);
    auto floats = abg::storage::check_allocation("a frame", (std::uint64_t{1} << 36) * sizeof(float));
    bool named = !floats && floats.error().message.find("a frame claims 256.0 GiB") != std::string::npos;
    ::_exit(!two && named ? 0 : 1);
  }
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}
