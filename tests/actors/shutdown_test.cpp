// A node that is slow to exit says where: stop_roles names the roles still
// running after its bound, and shutdown_watch names the stage of an exit
// that takes longer than its bound (and says nothing of one that does not).
#include <doctest/doctest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include <caf/all.hpp>

#include "actors/node/assembly.h"
#include "actors/node/shutdown_watch.h"
#include "tests/actors/log_lines.h"

using namespace abg;
using namespace std::chrono_literals;

namespace {


struct slow_state {
  static inline const char* name = "test.slow_role";
};

// Stops 1.5 s after it is told to (it traps the exit message).
caf::behavior slow_role(caf::stateful_actor<slow_state>* self) {
  self->set_exit_handler([self](caf::exit_msg&) { self->delayed_send(self, 1500ms, caf::ok_atom::value); });
  return {[self](caf::ok_atom) { self->quit(); }};
}

} // namespace

TEST_CASE("stop_roles names the roles still running after its bound, and waits for them") {
  caf::actor_system_config cfg;
  cfg.set("scheduler.max-threads", 2);
  cfg.set("logger.console", caf::atom("none"));
  caf::actor_system sys{cfg};
  actors::node_roles roles;
  auto slow = sys.spawn(slow_role);
  auto quick = sys.spawn([]() -> caf::behavior { return {[](caf::ok_atom) {}}; });
  roles.clients = {quick};
  roles.servers = {slow};
  test::log_lines log;
  const auto start = std::chrono::steady_clock::now();
  actors::stop_roles(sys, {roles}, [&](const std::string& l) { log.add(l); }, 1s);
  CHECK(std::chrono::steady_clock::now() - start >= 1500ms); // it waited for the slow one
  const auto said = log.lines();
  REQUIRE(said.size() == 1);
  CHECK(said[0].find("these roles still run: test.slow_role #" + std::to_string(slow.id())) != std::string::npos);
  CHECK(said[0].find(std::to_string(quick.id())) == std::string::npos);
}

TEST_CASE("shutdown_watch names the stage of a slow exit, and nothing of a quick one") {
  test::log_lines slow_log;
  {
    actors::shutdown_watch w([&](const std::string& l) { slow_log.add(l); }, 1s);
    w.stage("stopping the roles");
    std::this_thread::sleep_for(300ms);
    w.stage("closing the bulk channel"); // the clock runs from the first stage
    std::this_thread::sleep_for(1200ms);
  }
  const auto said = slow_log.lines();
  REQUIRE(said.size() == 1);
  CHECK(said[0] == "the exit has taken more than 1 s; it is at: closing the bulk channel");

  test::log_lines quick_log;
  {
    actors::shutdown_watch w([&](const std::string& l) { quick_log.add(l); }, 1s);
    { const actors::shutdown_watch::marker m(w, "the actor system's end"); }
    std::this_thread::sleep_for(200ms);
  }
  {
    actors::shutdown_watch unarmed([&](const std::string& l) { quick_log.add(l); }, 1s);
    std::this_thread::sleep_for(1200ms); // never armed: no line
  }
  CHECK(quick_log.lines().empty());
}
