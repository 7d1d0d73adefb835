// The inspector on its own: admin commands need a nonce and a proof, and a
// node that is about to exit waits (linger) until every console told that
// the run stops has detached, so that the answer is not lost with the node.
#include <doctest/doctest.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "actors/inspector.h"
#include "messages/admin_proof.h"
#include "messages/interfaces.h"
#include "messages/messages.h"

using namespace abg;
using namespace std::chrono_literals;

namespace {

const cluster_token admin_token{std::vector<std::uint8_t>(32, 9), "admin"};

using release_atom = caf::atom_constant<caf::atom("release")>;

// Stands in for the coordinator: answers every admin command at once, but a
// stop only when released (a coordinator's node may begin to exit first).
caf::behavior fake_coordinator(caf::event_based_actor* self) {
  auto held = std::make_shared<std::vector<caf::response_promise>>();
  return {
    [self, held](msg::admin_atom, const std::string& command) -> caf::result<std::string> {
      if (command != "stop") return "done: " + command;
      held->push_back(self->make_response_promise());
      return caf::delegated<std::string>{};
    },
    [held](release_atom) {
      for (auto& p : *held) p.deliver(std::string("done: stop"));
      held->clear();
    },
  };
}

struct fixture {
  caf::actor_system_config cfg;
  std::unique_ptr<caf::actor_system> sys;
  caf::actor coordinator;
  msg::inspector_actor inspector;
  fixture() {
    msg::register_message_types(cfg);
    cfg.set("scheduler.max-threads", 2);
    cfg.set("logger.console", caf::atom("none"));
    sys = std::make_unique<caf::actor_system>(cfg);
    coordinator = sys->spawn(fake_coordinator);
    inspector = actors::spawn_inspector(*sys, caf::actor_cast<msg::coordinator_actor>(coordinator), admin_token);
  }
  ~fixture() {
    caf::anon_send_exit(coordinator, caf::exit_reason::user_shutdown);
    caf::scoped_actor self{*sys};
    self->wait_for(coordinator, inspector);
  }
  std::string nonce_for(caf::scoped_actor& console) {
    std::string nonce;
    console->request(inspector, 10s, msg::challenge_atom::value)
      .receive([&](std::string& n) { nonce = std::move(n); }, [](caf::error&) {});
    REQUIRE_FALSE(nonce.empty());
    return nonce;
  }
  // Sends `command` as an admin console would; the answer, or the error's text.
  std::string send(caf::scoped_actor& console, const std::string& command, bool right_proof = true) {
    const auto nonce = nonce_for(console);
    const auto proof = right_proof ? msg::admin::proof_hex(admin_token.key, nonce, command) : std::string(64, '0');
    std::string out;
    console->request(inspector, 10s, msg::admin_atom::value, command, nonce, proof)
      .receive([&](std::string& done) { out = std::move(done); },
               [&](caf::error& e) { out = "error: " + sys->render(e); });
    return out;
  }
  // Whether linger answers within `wait`.
  bool lingers_done(std::chrono::milliseconds wait) {
    caf::scoped_actor node{*sys};
    bool done = false;
    node->request(inspector, wait, msg::linger_atom::value).receive([&](bool) { done = true; }, [](caf::error&) {});
    return done;
  }
};

} // namespace

TEST_CASE_FIXTURE(fixture, "inspector: a wrong proof is refused; a node lingers until a console that sent stop detaches") {
  {
    caf::scoped_actor console{*sys};
    CHECK(send(console, "stop", false).find("the admin token did not match") != std::string::npos);
    CHECK(send(console, "pause") == "done: pause");
    // No console sent a stop that was accepted: nothing to wait for.
    CHECK(lingers_done(10s));
    // The stop reaches the inspector before the node's linger does, the
    // coordinator's answer after it: the node still waits.
    const auto nonce = nonce_for(console);
    auto answer = console->request(inspector, 10s, msg::admin_atom::value, std::string("stop"), nonce,
                                   msg::admin::proof_hex(admin_token.key, nonce, "stop"));
    CHECK_FALSE(lingers_done(300ms));
    caf::anon_send(coordinator, release_atom::value);
    std::string got;
    std::move(answer).receive([&](std::string& done) { got = std::move(done); }, [](caf::error&) {});
    CHECK(got == "done: stop");
    // Answered but still attached: the node waits (it gives up after its own bound).
    CHECK_FALSE(lingers_done(300ms));
  } // the console detaches
  CHECK(lingers_done(10s));
}
