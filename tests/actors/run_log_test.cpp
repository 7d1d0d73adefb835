// The run's log: lines from several nodes wait out the window and are
// written in time order, each with its node and time; a line later than the
// window is written as it comes and counted; the tail includes the lines
// still waiting; a line cannot break into two or grow without bound; a
// resumed run appends to the file.
#include <doctest/doctest.h>

#include <fstream>
#include <sstream>

#include "actors/run_log.h"
#include "tests/test_util.h"

using namespace abg;
using actors::run_log;

namespace {

constexpr std::int64_t t0 = 1'780'000'000'000'000; // microseconds since the epoch

std::vector<std::string> lines_of(const std::filesystem::path& file) {
  std::ifstream in(file);
  std::vector<std::string> out;
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

msg::log_line line(const char* node, std::int64_t micros, const char* text) {
  return {std::string(node), micros, std::string(text)};
}

} // namespace

TEST_CASE("run log: in time order after the window, late lines counted, tail with what waits") {
  test::scratch_dir dir;
  const auto file = dir.path() / "model" / "run.log";
  {
    run_log log(file, std::chrono::seconds(2));
    log.add(line("b", t0 + 1'000'000, "second"));
    log.add(line("a", t0, "first"));
    log.add(line("a", t0 + 3'000'000, "third"));
    log.flush(t0 + 3'500'000); // first and second are 2 s old
    auto written = lines_of(file);
    REQUIRE(written.size() == 2);
    CHECK(written[0].ends_with(" a: first"));
    CHECK(written[1].ends_with(" b: second"));
    CHECK(written[0] < written[1]); // the stamps sort as text
    // The tail holds the waiting line too.
    auto tail = log.tail(10);
    REQUIRE(tail.size() == 3);
    CHECK(tail[2].text == "third");
    CHECK(log.tail(1).front().text == "third");
    CHECK(log.tail(2).front().text == "second");
    // Older than what is written already: written at once, counted as late.
    log.add(line("b", t0 + 500'000, "late"));
    CHECK(log.late() == 1);
    CHECK(lines_of(file).back().ends_with(" b: late"));
    CHECK_FALSE(log.problem());
  } // the rest is written at the end
  auto written = lines_of(file);
  REQUIRE(written.size() == 4);
  CHECK(written[3].ends_with(" a: third"));
  CHECK(run_log::format(line("a", t0 + 123, "x")) == "2026-05-28T20:26:40.000123Z a: x");

  // A resumed run appends.
  {
    run_log again(file);
    again.add(line("a", t0 + 10'000'000, "resumed"));
  }
  CHECK(lines_of(file).size() == 5);
}

TEST_CASE("run log: a line stays one line and is cut at max_text; no file: the tail only") {
  run_log log{std::filesystem::path{}};
  log.add(line("a", t0, "one\nb: forged"));
  log.add(msg::log_line{"a", t0 + 1, std::string(run_log::max_text + 100, 'x')});
  log.flush_all();
  auto tail = log.tail(5);
  REQUIRE(tail.size() == 2);
  CHECK(tail[0].text == "one b: forged");
  CHECK(tail[1].text.size() == run_log::max_text);
  CHECK_FALSE(log.problem());
  for (int i = 0; i < 600; ++i) log.add(line("a", t0 + 10 + i, "more"));
  log.flush_all();
  CHECK(log.tail(1000).size() == run_log::kept);
}

TEST_CASE("run log: a file that cannot be written is reported once, the tail goes on") {
  test::scratch_dir dir;
  std::ofstream(dir.path() / "blocker") << "a file where the folder should be";
  run_log log(dir.path() / "blocker" / "run.log");
  log.add(line("a", t0, "x"));
  log.flush_all();
  REQUIRE(log.problem());
  CHECK(log.problem()->find("cannot write the run's log") != std::string::npos);
  CHECK(log.tail(1).size() == 1);
}
