// The short run of the kernel that gives `abg simulate` a trainer's speed:
// it trains the config's model for the time asked, on tables of the rows
// asked (capped in bytes), and names what it cannot run.
#include <doctest/doctest.h>

#include <string>

#include "runtime/train/kernel_rate.h"

using namespace abg;

namespace {

config rate_config(bool all_negs, bool dynamic) {
  config c;
  entity_schema e;
  e.num_partitions = 4;
  c.entities.emplace_back("node", e);
  relation_schema r;
  r.name = "links";
  r.lhs = "node";
  r.rhs = "node";
  r.operator_ = "complex_diagonal";
  r.all_negs = all_negs;
  c.relations.push_back(r);
  c.dimension = 16;
  c.dynamic_relations = dynamic;
  c.workers = 1;
  c.batch_size = 100;
  return c;
}

} // namespace

TEST_CASE("a short run of the kernel trains the config's model for the time asked") {
  for (bool all_negs : {false, true}) {
    CAPTURE(all_negs);
    auto r = train::measure_kernel_rate(rate_config(all_negs, true), {{"node", 3000}}, 5, all_negs ? 0 : 700, 0.3);
    REQUIRE(r.has_value());
    CHECK(r->workers == 1);
    CHECK(r->seconds >= 0.3);
    CHECK(r->edges > 0);
    CHECK_FALSE(r->capped);
    CHECK(r->edges_per_second == doctest::Approx(static_cast<double>(r->edges) / r->seconds));
  }
}

TEST_CASE("a short run caps its tables in bytes and says so") {
  // 16 floats and one Adagrad value a row: 256 MiB hold about 3.9 M rows, not 10^9.
  auto r = train::measure_kernel_rate(rate_config(false, false), {{"node", 1'000'000'000}}, 1, 0, 0.1);
  REQUIRE(r.has_value());
  CHECK(r->capped);
  CHECK(r->edges > 0);
}

TEST_CASE("a short run of the kernel names what it cannot run") {
  auto none = train::measure_kernel_rate(rate_config(false, false), {}, 1, 0, 0.1);
  REQUIRE_FALSE(none.has_value());
  CHECK(none.error().message.find("entity type 'node' has 0 rows") != std::string::npos);
  auto one = train::measure_kernel_rate(rate_config(false, false), {{"node", 1}}, 1, 0, 0.1);
  REQUIRE_FALSE(one.has_value());
  CHECK(one.error().message.find("at least 2") != std::string::npos);
  auto zero = train::measure_kernel_rate(rate_config(false, false), {{"node", 100}}, 1, 0, 0.0);
  REQUIRE_FALSE(zero.has_value());
  CHECK(zero.error().message.find("positive duration") != std::string::npos);
}
