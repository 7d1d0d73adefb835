// CAF's messages by role: each message counted once, by the node that can
// name both of its ends (actors/role_traffic.h). The counters are the
// process's own: this test uses peers no connection has.
#include <doctest/doctest.h>

#include <algorithm>
#include <thread>

#include "actors/role_traffic.h"

using namespace abg::actors;

namespace {

constexpr std::uint8_t direct = role_traffic::direct_message, heartbeat = 6;

// The flows to `peer` in this process's report.
std::vector<role_traffic::flow> flows_to(const std::string& peer) {
  std::vector<role_traffic::flow> out;
  for (auto& f : role_traffic::measure().flows)
    if (f.peer == peer) out.push_back(f);
  return out;
}

const role_traffic::flow* flow_of(const std::vector<role_traffic::flow>& fs, bool outgoing, const std::string& role,
                               std::uint64_t remote) {
  for (const auto& f : fs)
    if (f.outgoing == outgoing && f.role == role && f.remote == remote) return &f;
  return nullptr;
}

} // namespace

TEST_CASE("role traffic: the sender counts messages to long-lived actors, a helper's node those to it") {
  const std::string peer = "test-peer-a:1";
  role_traffic::name_actor(900001, "lock_server");
  role_traffic::name_actor(900002, "trainer", true);
  // Before the coordinator told the long-lived actors, every destination is kept by id.
  role_traffic::count(peer, true, direct, 900001, 424242, 100);
  role_traffic::set_long_lived({800001, 800002});
  role_traffic::count(peer, true, direct, 900001, 800001, 100);  // long-lived to long-lived: the sender's
  role_traffic::count(peer, true, direct, 900001, 800001, 60);
  role_traffic::count(peer, true, direct, 900001, 777777, 100);  // to a helper there: its node's
  role_traffic::count(peer, false, direct, 800002, 900001, 100); // to a long-lived actor here: the sender's
  role_traffic::count(peer, false, direct, 800002, 900002, 50);  // to a helper here: ours
  role_traffic::count(peer, false, direct, 777777, 900002, 50);  // ... from an actor no node named
  role_traffic::count(peer, true, direct, 0, 800002, 40);        // an anonymous send: the node's
  role_traffic::count(peer, true, heartbeat, 0, 0, 32);          // BASP's own: the sender's
  role_traffic::count(peer, false, heartbeat, 0, 0, 32);
  role_traffic::count(peer, false, direct, 800001, 900003, 70);  // to an actor no role named: as a helper's
  const auto fs = flows_to(peer);
  REQUIRE(flow_of(fs, true, "lock_server", 424242));
  const auto* to_long = flow_of(fs, true, "lock_server", 800001);
  REQUIRE(to_long);
  CHECK(to_long->messages == 2);
  CHECK(to_long->bytes == 160);
  const auto* to_helper = flow_of(fs, false, "trainer", 800002);
  REQUIRE(to_helper);
  CHECK(to_helper->messages == 1);
  CHECK(to_helper->bytes == 50);
  REQUIRE(flow_of(fs, false, "trainer", role_traffic::unknown_actor));
  REQUIRE(flow_of(fs, true, std::string(role_traffic::node_role), 800002));
  REQUIRE(flow_of(fs, true, std::string(role_traffic::caf_role), 0));
  REQUIRE(flow_of(fs, false, std::string(role_traffic::other_role), 800001));
  CHECK(fs.size() == 7); // and nothing else: not the helper's, the long-lived receiver's or the incoming heartbeat
  // The report lists the role actors, not the helpers.
  bool listed = false, helper_listed = false;
  for (const auto& a : role_traffic::measure().long_lived) {
    listed = listed || (a.id == 900001 && a.role == "lock_server");
    helper_listed = helper_listed || a.id == 900002;
  }
  CHECK(listed);
  CHECK_FALSE(helper_listed);
  role_traffic::forget_actor(900001);
  role_traffic::forget_actor(900002);
}

// The coordinator's first status round has no node's actors to send yet:
// an empty list must not read as "every destination is a helper", or the
// messages of that round would be counted by neither end.
TEST_CASE("role traffic: an empty list of long-lived actors is not known yet; the sender counts") {
  const std::string peer = "test-peer-empty:1";
  role_traffic::name_actor(900011, "trainer");
  role_traffic::set_long_lived({});
  role_traffic::count(peer, true, direct, 900011, 800011, 100);
  const auto* sent = flow_of(flows_to(peer), true, "trainer", 800011);
  REQUIRE(sent);
  CHECK(sent->messages == 1);
  // Once known, a destination outside the list is a helper, which its node counts.
  role_traffic::set_long_lived({800012});
  role_traffic::count(peer, true, direct, 900011, 800011, 100);
  CHECK(flow_of(flows_to(peer), true, "trainer", 800011)->messages == 1);
  role_traffic::forget_actor(900011);
}

TEST_CASE("role traffic: a helper takes the role of the thread it was made on, for as long as it lives") {
  const std::string peer = "test-peer-b:1";
  role_traffic::set_long_lived({800001});
  std::thread([&] {
    role_traffic::set_thread_role("partition_server");
    role_traffic::helper_name named{900010};
    role_traffic::count(peer, false, direct, 800001, 900010, 10);
  }).join();
  CHECK(role_traffic::thread_role() == role_traffic::other_role); // this thread's is its own
  role_traffic::count(peer, false, direct, 800001, 900010, 10);  // gone: no role names it any more
  const auto fs = flows_to(peer);
  REQUIRE(flow_of(fs, false, "partition_server", 800001));
  REQUIRE(flow_of(fs, false, std::string(role_traffic::other_role), 800001));
}

TEST_CASE("role traffic: the ends of CAF's connections are reported") {
  role_traffic::connection_opened("127.0.0.1:65001");
  const auto ends = role_traffic::measure().local_ends;
  CHECK(std::find(ends.begin(), ends.end(), "127.0.0.1:65001") != ends.end());
}
