// What the console shows of the tables: a partition's row names every
// partition server storing it and every trainer holding it, with versions;
// a node's bytes are its stored and held tables and its parameters; a
// shard's rates are its counts over its time.
#include <doctest/doctest.h>

#include "actors/holdings_view.h"

using namespace abg;

TEST_CASE("holdings: partitions by server and trainer, bytes per node, shard rates") {
  const msg::partition_info p0{{std::string("user"), 0}, 3, 100, 7};
  const msg::partition_info p1{{std::string("user"), 1}, 2, 50, 7};
  const msg::partition_info p1_held{{std::string("user"), 1}, 2, 50, 7};
  CHECK(actors::table_bytes(p0) == 100 * 8 * 4);

  // Built whole: GCC 12 warns falsely (-Wrestrict) on assigning short literals to the names.
  std::vector<actors::node_holdings> nodes{{std::string("a"), 0u, std::nullopt, std::nullopt, std::nullopt},
                                           {std::string("b"), 1u, std::nullopt, std::nullopt, std::nullopt},
                                           {std::string("c"), std::nullopt, std::nullopt, std::nullopt, std::nullopt}};
  nodes[0].stored = std::vector<msg::partition_info>{p0};
  msg::trainer_status held;
  held.held = {p1_held};
  held.parameter_bytes = 64;
  nodes[0].trainer_status = held;
  nodes[0].shard = msg::param_status{2, 128, 10, 20, 400, 800, 4.0};
  nodes[1].stored = std::vector<msg::partition_info>{p1};
  // c did not answer.

  auto rows = actors::partition_rows(nodes)["partitions"];
  REQUIRE(rows.size() == 2);
  CHECK(rows[0]["part"] == 0);
  CHECK(rows[0]["bytes"] == 100 * 8 * 4);
  REQUIRE(rows[0]["stored_on"].size() == 1);
  CHECK(rows[0]["stored_on"][0]["node"] == "a");
  CHECK(rows[0]["stored_on"][0]["version"] == 3);
  CHECK(rows[0]["held_by"].empty());
  CHECK(rows[1]["stored_on"][0]["node"] == "b");
  REQUIRE(rows[1]["held_by"].size() == 1);
  CHECK(rows[1]["held_by"][0]["node"] == "a");
  CHECK(rows[1]["held_by"][0]["trainer"] == 0);

  const auto a = actors::held_by(nodes[0]);
  CHECK(a.partitions == (100 + 50) * 8 * 4);
  CHECK(a.parameters == 64 + 128);
  CHECK(actors::held_by(nodes[2]).partitions == 0);

  auto shards = actors::param_rows(nodes)["shards"];
  REQUIRE(shards.size() == 1);
  CHECK(shards[0]["node"] == "a");
  CHECK(shards[0]["pushes_per_second"].get<double>() == doctest::Approx(2.5));
  CHECK(shards[0]["pulls_per_second"].get<double>() == doctest::Approx(5.0));
  CHECK(shards[0]["pulled_bytes"] == 800);
}
