// The console's traffic view from the nodes' reports: a connection counts
// for the pair once, on the side that opened it to where the other listens;
// a console's connection (an address nobody listens on) belongs to no pair;
// the iteration's bytes are what grew since its first report.
#include <doctest/doctest.h>

#include "actors/traffic_view.h"

using namespace abg;

namespace {

msg::node_status report(std::vector<std::uint64_t> sent, std::vector<std::uint64_t> received,
                        std::vector<std::string> peers, std::vector<std::uint64_t> to, std::vector<std::uint64_t> from) {
  msg::node_status s;
  s.sent = std::move(sent);
  s.received = std::move(received);
  s.peers = std::move(peers);
  s.peer_sent = std::move(to);
  s.peer_received = std::move(from);
  return s;
}

const nlohmann::json* pair(const nlohmann::json& rows, const std::string& from, const std::string& to) {
  for (const auto& p : rows["pairs"])
    if (p["from"] == from && p["to"] == to) return &p;
  return nullptr;
}

} // namespace

TEST_CASE("traffic view: per node by purpose, per pair once, since the iteration began") {
  // Built whole: GCC 12 warns falsely (-Wrestrict) on assigning short literals to the names.
  std::vector<actors::traffic_node> nodes{
    {std::string("a"), {"127.0.0.1:4000", "127.0.0.1:4001"}, std::nullopt, std::nullopt},
    {std::string("b"), {"127.0.0.1:5000", "127.0.0.1:5001"}, std::nullopt, std::nullopt},
    {std::string("c"), {}, std::nullopt, std::nullopt}, // not joined: reports nothing
  };
  // b opened a CAF connection to a (b sent 300, received 100) and a bulk
  // channel to a (sent 1000, received 50); a opened a bulk channel to b
  // (sent 20, received 2000); a console (port 6000) talked to a.
  nodes[0].now = report({2000, 0, 0, 120}, {1000, 0, 0, 350}, {"127.0.0.1:5001", "127.0.0.1:6000", "127.0.0.1:39999"},
                        {20, 7, 150}, {2000, 9, 1300});
  nodes[1].now = report({1000, 0, 0, 320}, {2000, 0, 0, 150}, {"127.0.0.1:4000", "127.0.0.1:4001"}, {300, 1000},
                        {100, 50});
  nodes[1].iteration = report({400, 0, 0, 20}, {500, 0, 0, 50}, {"127.0.0.1:4000"}, {200}, {60});
  // Their messages the same way: a's bulk channel to b sent 1 and got 3; b's
  // CAF connection sent 30 and got 10 (20 and 4 before the iteration), its bulk channel 4 and 2.
  nodes[0].now->peer_messages_sent = {1, 0, 5};
  nodes[0].now->peer_messages_received = {3, 0, 6};
  nodes[1].now->peer_messages_sent = {30, 4};
  nodes[1].now->peer_messages_received = {10, 2};
  nodes[1].iteration->peer_messages_sent = {20};
  nodes[1].iteration->peer_messages_received = {4};
  auto rows = actors::traffic_rows(nodes);
  REQUIRE(rows["nodes"].size() == 2); // c reported nothing
  CHECK(rows["nodes"][0]["node"] == "a");
  CHECK(rows["nodes"][0]["sent"]["swaps"] == 2000);
  CHECK(rows["nodes"][0]["sent"]["total"] == 2120);
  CHECK(rows["nodes"][0]["iteration_sent"]["total"] == 2120); // no report before the iteration: all of it
  CHECK(rows["nodes"][1]["iteration_sent"]["swaps"] == 600);
  CHECK(rows["nodes"][1]["iteration_received"]["control"] == 100);
  // Messages: reported by none of them here, so zero.
  CHECK(rows["nodes"][0]["sent_messages"]["total"] == 0);
  CHECK(rows["nodes"][0]["sent_messages"]["control"] == 0);

  REQUIRE(rows["pairs"].size() == 2);
  const auto* ab = pair(rows, "a", "b");
  const auto* ba = pair(rows, "b", "a");
  REQUIRE(ab);
  REQUIRE(ba);
  // a -> b: a's bulk channel to b (20) and what b received on its own connections (100 + 50).
  CHECK((*ab)["bytes"] == 170);
  // b -> a: b's connections (300 + 1000) and a's bulk channel's received bytes (2000).
  CHECK((*ba)["bytes"] == 3300);
  // Since the iteration: b's CAF connection had sent 200 and received 60 then; its bulk channel is new.
  CHECK((*ba)["iteration_bytes"] == 100 + 1000 + 2000);
  CHECK((*ab)["iteration_bytes"] == 20 + 40 + 50);
  CHECK((*ab)["messages"] == 1 + 10 + 2);
  CHECK((*ba)["messages"] == 30 + 4 + 3);
  CHECK((*ab)["iteration_messages"] == 1 + 6 + 2);
  CHECK((*ba)["iteration_messages"] == 10 + 4 + 3);
}

TEST_CASE("traffic view: messages by the purposes abg frames, in total and since the iteration began") {
  std::vector<actors::traffic_node> nodes{{std::string("a"), {"127.0.0.1:4000"}, std::nullopt, std::nullopt}};
  nodes[0].now = report({2000, 300, 80, 120}, {1000, 0, 80, 350}, {}, {}, {});
  nodes[0].now->messages_sent = {12, 4, 2, 30};
  nodes[0].now->messages_received = {9, 0, 2, 0};
  nodes[0].iteration = report({500, 0, 40, 20}, {500, 0, 40, 50}, {}, {}, {});
  nodes[0].iteration->messages_sent = {5, 0, 1, 0};
  nodes[0].iteration->messages_received = {3}; // an older node's shorter report: the rest count as 0
  auto rows = actors::traffic_rows(nodes);
  REQUIRE(rows["nodes"].size() == 1);
  const auto& a = rows["nodes"][0];
  CHECK(a["sent_messages"]["swaps"] == 12);
  CHECK(a["sent_messages"]["checkpoints"] == 4);
  CHECK(a["sent_messages"]["parameters"] == 2);
  CHECK(a["sent_messages"]["control"] == 30);
  CHECK(a["sent_messages"]["total"] == 48);
  CHECK(a["received_messages"]["total"] == 11);
  CHECK(a["iteration_sent_messages"]["swaps"] == 7);
  CHECK(a["iteration_sent_messages"]["total"] == 42);
  CHECK(a["iteration_received_messages"]["swaps"] == 6);
  CHECK(a["iteration_received_messages"]["parameters"] == 2);
}

TEST_CASE("traffic view: an IPv6 host's endpoint has brackets, as the kernel's peer addresses") {
  CHECK(actors::endpoint("::1", 4000) == "[::1]:4000");
  CHECK(actors::endpoint("10.0.0.2", 4000) == "10.0.0.2:4000");
}

namespace {

const nlohmann::json* role_pair(const nlohmann::json& rows, const std::string& from, const std::string& from_role,
                                const std::string& to, const std::string& to_role) {
  for (const auto& p : rows["role_pairs"])
    if (p["from"] == from && p["from_role"] == from_role && p["to"] == to && p["to_role"] == to_role) return &p;
  return nullptr;
}

msg::role_flow flow(std::string peer, bool outgoing, std::string role, std::uint64_t remote, std::uint64_t messages) {
  return {std::move(peer), outgoing, std::move(role), remote, messages, messages * 100};
}

} // namespace

TEST_CASE("traffic view: CAF's messages by role pair, each end's role from the node it lives on") {
  std::vector<actors::traffic_node> nodes{
    {std::string("a"), {"127.0.0.1:4000"}, msg::node_status{}, std::nullopt},
    {std::string("b"), {"127.0.0.1:5000"}, msg::node_status{}, msg::node_status{}},
  };
  auto& a = *nodes[0].now;
  auto& b = *nodes[1].now;
  a.actors = {{5, "lock_server"}, {6, "coordinator"}};
  b.actors = {{9, "trainer"}};
  // b opened the connection to a's port; a sees it from b's own end, which b reports.
  b.local_ends = {"127.0.0.1:5555"};
  b.flows = {flow("127.0.0.1:4000", true, "trainer", 5, 10),       // b's trainer to a's lock server
             flow("127.0.0.1:4000", false, "trainer", 6, 3),       // to a helper of b's trainer, from a's coordinator
             flow("127.0.0.1:4000", true, "node", 6, 7),           // b's log lines to a's coordinator
             flow("127.0.0.1:4000", true, "caf", 0, 2),            // BASP's own (heartbeats)
             flow("127.0.0.1:4000", true, "trainer", 12345, 1)};   // to an actor a does not list: a counts it
  a.flows = {flow("127.0.0.1:5555", true, "lock_server", 9, 10),   // a's lock server answers b's trainer
             flow("127.0.0.1:5555", false, "partition_server", ~std::uint64_t{0}, 4), // from an actor b cannot name
             flow("127.0.0.1:5555", false, "coordinator", 0, 1),   // an anonymous sender on b
             flow("127.0.0.1:9999", true, "coordinator", 9, 5)};   // a console's connection: no node there
  nodes[1].iteration->flows = {flow("127.0.0.1:4000", true, "trainer", 5, 4)};
  auto rows = actors::traffic_rows(nodes);
  const auto* to_lock = role_pair(rows, "b", "trainer", "a", "lock_server");
  REQUIRE(to_lock);
  CHECK((*to_lock)["messages"] == 10);
  CHECK((*to_lock)["bytes"] == 1000);
  CHECK((*to_lock)["iteration_messages"] == 6);
  CHECK((*to_lock)["iteration_bytes"] == 600);
  const auto* from_lock = role_pair(rows, "a", "lock_server", "b", "trainer");
  REQUIRE(from_lock);
  CHECK((*from_lock)["messages"] == 10);
  CHECK((*from_lock)["iteration_messages"] == 10); // a reported nothing before the iteration
  REQUIRE(role_pair(rows, "a", "coordinator", "b", "trainer"));
  CHECK((*role_pair(rows, "a", "coordinator", "b", "trainer"))["messages"] == 3);
  REQUIRE(role_pair(rows, "b", "node", "a", "coordinator"));
  REQUIRE(role_pair(rows, "b", "caf", "a", "caf"));
  REQUIRE(role_pair(rows, "b", "other", "a", "partition_server"));
  CHECK((*role_pair(rows, "b", "node", "a", "coordinator"))["messages"] == 7 + 1);
  // Nothing else: the message to an actor a does not list, and the console's, are not counted here.
  CHECK(rows["role_pairs"].size() == 6);
}
