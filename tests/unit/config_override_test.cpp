// -p KEY=VALUE overrides: dotted paths, typed like the file, validated alike.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "abg/config.h"

namespace {

const std::string base = R"(entity_path = "e"
edge_paths = ["a"]
checkpoint_path = "c"
dimension = 10
[entities.all]
num_partitions = 1
[[relations]]
name = "r"
lhs = "all"
rhs = "all"
)";

abg::config load(std::string_view text, const std::vector<std::string>& overrides) {
  auto r = abg::parse_config(text, "t.toml", overrides);
  if (!r)
    FAIL(r.error().message);
  return r->value;
}

std::string errors(std::string_view text, const std::vector<std::string>& overrides) {
  auto r = abg::parse_config(text, "t.toml", overrides);
  REQUIRE_FALSE(r.has_value());
  return r.error().message;
}

} // namespace

TEST_CASE("config overrides: scalars, nested keys, lists, new keys") {
  auto c = load(base, {"dimension=200", "lr=0.5", "global_emb=false", "max_edges_per_chunk=1e6",
                       "entities.all.num_partitions=4", "relations.0.operator=translation",
                       "edge_paths=x,y,z", "init_path=warm", "distributed_init_method=tcp://h:1?a=b",
                       "bias=True"});
  CHECK(c.dimension == 200);
  CHECK(c.lr == 0.5);
  CHECK_FALSE(c.global_emb);
  CHECK(c.max_edges_per_chunk == 1'000'000);
  CHECK(c.entities[0].second.num_partitions == 4);
  CHECK(c.relations[0].operator_ == "translation");
  CHECK(c.edge_paths == std::vector<std::string>{"x", "y", "z"});
  CHECK(c.init_path == "warm");
  CHECK(c.distributed_init_method == "tcp://h:1?a=b");
  CHECK(c.bias);
  CHECK(load(base, {"edge_paths="}).edge_paths.empty());
  CHECK(load(base, {"dimension=1", "dimension=2"}).dimension == 2); // the last one wins
}

TEST_CASE("config overrides: supply missing keys and new entity types") {
  std::string without_dimension = base;
  without_dimension.erase(without_dimension.find("dimension = 10\n"), 15);
  CHECK(load(without_dimension, {"dimension=3"}).dimension == 3);

  auto c = load(base, {"entities.user.num_partitions=2", "entities.user.dimension=4"});
  REQUIRE(c.entities.size() == 2);
  CHECK(c.entities[1].first == "user");
  CHECK(c.entities[1].second.num_partitions == 2);
  CHECK(c.dimension_of("user") == 4);

  // Entity type names may contain dots.
  c = load(base, {"entities.a.b.num_partitions=3"});
  CHECK(c.entities[1].first == "a.b");
}

TEST_CASE("config overrides: errors name the override") {
  CHECK(errors(base, {"relations.0.operator=foo"})
        == "-p relations.0.operator=foo: relations.0.operator: got \"foo\", expected one of none, "
           "diagonal, translation, linear, affine, complex_diagonal");
  CHECK(errors(base, {"dimension=abc"})
        == "-p dimension=abc: dimension: got \"abc\", expected a positive integer");
  CHECK(errors(base, {"dimension=0"})
        == "-p dimension=0: dimension: got 0, expected a positive integer");
  CHECK(errors(base, {"global_emb=yes"})
        == "-p global_emb=yes: global_emb: got \"yes\", expected true or false");
  CHECK(errors(base, {"num_epoch=3"})
        == "-p num_epoch=3: num_epoch: unknown key, did you mean 'num_epochs'?");
  CHECK(errors(base, {"entities.all.num_partition=3"})
        == "-p entities.all.num_partition=3: entities.all.num_partition: unknown key, did you "
           "mean 'num_partitions'?");
  CHECK(errors(base, {"relations.5.name=x"})
        == "-p relations.5.name=x: relations.5.name: no relation 5 (the config has 1, numbered "
           "from 0)");
  CHECK(errors(base, {"relations.first.name=x"})
        == "-p relations.first.name=x: relations.first.name: no relation first (the config has 1, "
           "numbered from 0)");
  CHECK(errors(base, {"relations=x"})
        == "-p relations=x: relations: expected entities.NAME.KEY or relations.INDEX.KEY");
  CHECK(errors(base, {"entites.all.num_partitions=3"})
        == "-p entites.all.num_partitions=3: entites.all.num_partitions: unknown key, did you "
           "mean 'entities'?");
  CHECK(errors(base, {"dimension"})
        == "-p dimension: dimension: expected KEY=VALUE, e.g. dimension=200 or "
           "relations.0.operator=translation");
  CHECK(errors(base, {"entities.new.dimension=3"})
        == "-p entities.new.dimension=3: entities.new.num_partitions: missing, expected a "
           "positive integer");
  CHECK(errors(base, {"relations.0.lhs=nobody"})
        == "-p relations.0.lhs=nobody: relations.0.lhs: got \"nobody\", expected a defined entity "
           "type ('all')");
}

TEST_CASE("config overrides: file errors first, then overrides in the order given") {
  CHECK(errors("lr = -1\n" + base, {"dimension=x", "num_epochs=-1"})
        == "t.toml:1:6: lr: got -1, expected a non-negative number\n"
           "-p dimension=x: dimension: got \"x\", expected a positive integer\n"
           "-p num_epochs=-1: num_epochs: got -1, expected a non-negative integer");
}

TEST_CASE("config overrides: an override fixes a bad file value") {
  CHECK(load("lr = -1\n" + base, {"lr=0.1"}).lr == 0.1);
}
