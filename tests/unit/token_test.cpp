// Cluster token files (abg/token.h): made private, refused when others may
// read them or when they hold no token, and the loopback token this user's
// nodes share.
#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <optional>
#include <vector>

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include "abg/token.h"
#include "tests/test_util.h"

namespace fs = std::filesystem;

namespace {

unsigned mode_of(const fs::path& p) {
  struct stat st{};
  REQUIRE(::stat(p.c_str(), &st) == 0);
  return st.st_mode & 0777;
}

} // namespace

TEST_CASE("token files: written private and random, never overwritten, read back") {
  abg::test::scratch_dir dir;
  auto file = dir / "a.token";
  REQUIRE(abg::write_token_file(file));
  CHECK(mode_of(file) == 0600);
  auto a = abg::read_token_file(file);
  REQUIRE_MESSAGE(a, (a ? "" : a.error().message));
  CHECK(a->key.size() == abg::token_bytes);
  auto again = abg::write_token_file(file);
  REQUIRE_FALSE(again);
  CHECK(again.error().message.find("never overwritten") != std::string::npos);
  REQUIRE(abg::write_token_file(dir / "b.token"));
  auto b = abg::read_token_file(dir / "b.token");
  REQUIRE(b);
  CHECK(a->key != b->key);
}

TEST_CASE("token files: refused when others may read them, or when they hold no token") {
  abg::test::scratch_dir dir;
  auto refused = [&](const fs::path& f, const std::string& needle) {
    auto t = abg::read_token_file(f);
    REQUIRE_FALSE(t);
    CAPTURE(t.error().message);
    CHECK(t.error().message.find(needle) != std::string::npos);
    CHECK(t.error().message.find(f.string()) != std::string::npos);
  };
  auto open_file = dir / "open.token";
  REQUIRE(abg::write_token_file(open_file));
  ::chmod(open_file.c_str(), 0644);
  refused(open_file, "chmod 600");
  auto write_private = [&](const std::string& name, const std::string& text) {
    auto f = dir / name;
    abg::test::write_text(f, text);
    ::chmod(f.c_str(), 0600);
    return f;
  };
  refused(write_private("short.token", "abcd\n"), "at least 32");
  refused(write_private("word.token", "password password password password\n"), "not a hex digit");
  refused(dir / "missing.token", "abg cluster token");
  auto ok = abg::read_token_file(write_private("spaced.token", "0011223344556677 8899aabbccddeeff\n"));
  REQUIRE(ok);
  CHECK(ok->key.size() == 16);
  CHECK(ok->key[15] == 0xff);
}

TEST_CASE("the loopback token: one per user, in a folder only the user may enter") {
  abg::test::scratch_dir dir;
  const char* old = std::getenv("XDG_RUNTIME_DIR");
  std::string saved = old ? old : "";
  ::setenv("XDG_RUNTIME_DIR", dir.path().c_str(), 1);
  auto first = abg::loopback_token();
  auto second = abg::loopback_token();
  if (old)
    ::setenv("XDG_RUNTIME_DIR", saved.c_str(), 1);
  else
    ::unsetenv("XDG_RUNTIME_DIR");
  REQUIRE_MESSAGE(first, (first ? "" : first.error().message));
  REQUIRE(second);
  CHECK(first->key == second->key);
  CHECK(mode_of(dir / "abg") == 0700);
  CHECK(mode_of(dir / "abg" / "loopback.token") == 0600);
  int files = 0;
  for ([[maybe_unused]] auto& e : fs::directory_iterator(dir / "abg")) ++files;
  CHECK(files == 1);
  // A runtime folder others may enter is refused.
  ::chmod((dir / "abg").c_str(), 0755);
  ::setenv("XDG_RUNTIME_DIR", dir.path().c_str(), 1);
  auto open_dir = abg::user_runtime_dir();
  if (old)
    ::setenv("XDG_RUNTIME_DIR", saved.c_str(), 1);
  else
    ::unsetenv("XDG_RUNTIME_DIR");
  REQUIRE_FALSE(open_dir);
  CHECK(open_dir.error().message.find("only it may enter") != std::string::npos);
}

TEST_CASE("a run's inspector token: found while the run lives, a killed run's file skipped and removed") {
  abg::test::scratch_dir dir;
  const char* old = std::getenv("XDG_RUNTIME_DIR");
  std::string saved = old ? old : "";
  ::setenv("XDG_RUNTIME_DIR", dir.path().c_str(), 1);
  auto restore = [&] {
    if (old)
      ::setenv("XDG_RUNTIME_DIR", saved.c_str(), 1);
    else
      ::unsetenv("XDG_RUNTIME_DIR");
  };
  auto none = abg::running_inspector_token(4711);
  auto file = abg::inspector_token_file(4711);
  REQUIRE(file);
  std::optional<abg::run_token_file> run;
  std::vector<std::uint8_t> run_key;
  std::optional<abg::expected<std::optional<abg::cluster_token>>> while_running, after_run, stale;
  {
    auto made = abg::run_token_file::create(file->parent_path() / "inspector-pid1.token");
    REQUIRE_MESSAGE(made, (made ? "" : made.error().message));
    REQUIRE(made->move_to(*file));
    run.emplace(std::move(*made));
    run_key = run->token().key;
    while_running = abg::running_inspector_token(4711);
    CHECK(fs::exists(*file));
    CHECK(mode_of(*file) == 0600);
    run.reset();
    CHECK_FALSE(fs::exists(*file));
  }
  after_run = abg::running_inspector_token(4711);
  // What a SIGKILLed run leaves: the file, and no process holding its lock.
  REQUIRE(abg::write_token_file(*file));
  stale = abg::running_inspector_token(4711);
  bool stale_removed = !fs::exists(*file);
  restore();
  REQUIRE(none);
  CHECK_FALSE(*none);
  REQUIRE(*while_running);
  REQUIRE(**while_running);
  CHECK((**while_running)->key == run_key);
  CHECK(run_key.size() == abg::token_bytes);
  REQUIRE(*after_run);
  CHECK_FALSE(**after_run);
  REQUIRE(*stale);
  CHECK_FALSE(**stale);
  CHECK(stale_removed);
}

TEST_CASE("a run starting its inspector removes the token files killed runs left, never a live run's") {
  abg::test::scratch_dir dir;
  const char* old = std::getenv("XDG_RUNTIME_DIR");
  std::string saved = old ? old : "";
  ::setenv("XDG_RUNTIME_DIR", dir.path().c_str(), 1);
  std::size_t removed = 0;
  bool live_kept = false, stale_gone = false, other_kept = false, starting_kept = false;
  {
    auto live_file = abg::inspector_token_file(4711);
    REQUIRE(live_file);
    auto live = abg::run_token_file::create(*live_file);
    REQUIRE_MESSAGE(live, (live ? "" : live.error().message));
    // What SIGKILLed runs leave: files nobody holds a lock on at their
    // port's name, or at their process's before the port was known (a
    // process that is gone: a child reaped). A live process's file stays:
    // it may be between writing its file and locking it.
    const auto folder = live_file->parent_path();
    const pid_t child = ::fork();
    if (child == 0) ::_exit(0);
    REQUIRE(child > 0);
    REQUIRE(::waitpid(child, nullptr, 0) == child);
    const auto starting = folder / fmt::format("inspector-pid{}.token", ::getpid());
    for (auto name : {std::string("inspector-4712.token"), std::string("inspector-4713.token"),
                      fmt::format("inspector-pid{}.token", child)})
      REQUIRE(abg::write_token_file(folder / name));
    REQUIRE(abg::write_token_file(starting));
    REQUIRE(abg::write_token_file(folder / "other.token")); // not an inspector's
    removed = abg::remove_stale_inspector_tokens();
    live_kept = fs::exists(*live_file);
    stale_gone = !fs::exists(folder / "inspector-4712.token") && !fs::exists(folder / "inspector-4713.token") &&
                 !fs::exists(folder / fmt::format("inspector-pid{}.token", child));
    starting_kept = fs::exists(starting);
    other_kept = fs::exists(folder / "other.token");
  }
  if (old)
    ::setenv("XDG_RUNTIME_DIR", saved.c_str(), 1);
  else
    ::unsetenv("XDG_RUNTIME_DIR");
  CHECK(removed == 3);
  CHECK(live_kept);
  CHECK(stale_gone);
  CHECK(other_kept);
  CHECK(starting_kept);
}

TEST_CASE("loopback hosts") {
  CHECK(abg::is_loopback_host("127.0.0.1"));
  CHECK(abg::is_loopback_host("127.3.2.1"));
  CHECK(abg::is_loopback_host("localhost"));
  CHECK(abg::is_loopback_host("::1"));
  CHECK_FALSE(abg::is_loopback_host("10.0.0.1"));
  CHECK_FALSE(abg::is_loopback_host("128.0.0.1"));
  CHECK_FALSE(abg::is_loopback_host(""));
  CHECK_FALSE(abg::is_loopback_host("example.org"));
}
