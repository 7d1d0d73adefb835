// run_training with every message between roles serialized and deserialized
// by CAF's binary serializer (tensors through the Cap'n Proto codec,
// actors/wire_relay.h), and its partitions spread over 3 partition servers,
// ends with the same checkpoint, bit for bit, as the in-memory run with one
// partition server (workers = 1, fixed seed).
// LibTorch (through train.h) first: its glog CHECK macro must not replace doctest's.
#include "abg/node/run.h"

#include <doctest/doctest.h>

#include <fstream>
#include <iterator>
#include <string>

#include <fmt/format.h>

#include "abg/config.h"
#include "abg/import.h"
#include "abg/storage/checkpoint.h"
#include "actors/wire_relay.h"
#include "actors/spawn.h"
#include "tests/test_util.h"

namespace fs = std::filesystem;
using namespace abg;

namespace {

struct wire_run {
  abg::test::scratch_dir dir;
  std::string toml(std::string_view model) const {
    // 3 partitions: buckets swap partitions through the partition server
    return fmt::format(R"(entity_path = "{0}/ent"
edge_paths = ["{0}/edges"]
checkpoint_path = "{0}/{1}"
dimension = 12
num_epochs = 2
eval_fraction = 0
workers = 1
seed = 11
[entities.node]
num_partitions = 3
[[relations]]
name = "r"
lhs = "node"
rhs = "node"
operator = "diagonal"
)",
                       dir.path().string(), model);
  }
  config load(std::string_view model) const {
    auto c = parse_config(toml(model), "test.toml");
    REQUIRE_MESSAGE(c, (c ? "" : c.error().message));
    return c->value;
  }
  wire_run() {
    std::string text;
    for (int i = 0; i < 3000; ++i) text += fmt::format("n{}\tn{}\n", i % 300, (i * 13 + 5) % 300);
    abg::test::write_text(dir / "edges.tsv", text);
    import_options o;
    o.inputs = {dir / "edges.tsv"};
    o.lhs_col = 0;
    o.rhs_col = 1;
    auto imported = run_import(load("m"), o);
    REQUIRE_MESSAGE(imported, (imported ? "" : imported.error().message));
  }
  void train(std::string_view model, bool wire, std::vector<std::string> overrides = {}) {
    node::train_options options;
    options.seed = 11;
    options.over_the_wire = wire;
    auto c = parse_config(toml(model), "test.toml", overrides);
    REQUIRE_MESSAGE(c, (c ? "" : c.error().message));
    auto s = node::run_simulation(c->value, toml(model), options);
    REQUIRE_MESSAGE(s, (s ? "" : s.error().message));
    CHECK(s->iterations_run == 2);
  }
};

std::string bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

} // namespace

TEST_CASE("training with every server message through the wire format equals the in-memory run bit for bit") {
  wire_run run;
  run.train("memory", false);
  // Through the wire format, with the 3 partitions on 3 partition servers.
  run.train("wire", true, {"num_partition_servers=3"});
  const auto a = run.dir / "memory", b = run.dir / "wire";
  auto listed = abg::storage::read_checkpoint_manifest(abg::storage::checkpoint_version_dir(a, 2));
  REQUIRE_MESSAGE(listed, (listed ? "" : listed.error().message));
  int compared = 0;
  for (auto& f : listed->files) {
    if (!f.name.ends_with(".abgt")) continue; // tensors; the manifest names its own paths
    CAPTURE(f.name);
    // Table files lie in tables/, the shared parameters in the version's folder.
    const auto rel = f.name.starts_with("tables/") ? fs::path(f.name) : fs::path("v2") / f.name;
    REQUIRE(fs::exists(b / rel));
    CHECK(bytes(a / rel) == bytes(b / rel));
    ++compared;
  }
  CHECK(compared == 7); // 3 embedding and 3 optimizer tables, the shared parameters
}

TEST_CASE("a wire relay hands back serialized copies, equal in value") {
  caf::actor_system_config cfg;
  abg::msg::register_message_types(cfg);
  cfg.set("logger.console", caf::atom("none"));
  caf::actor_system sys{cfg};
  auto server = abg::actors::spawn_partition_server(sys, "server");
  auto relay = abg::actors::spawn_wire_relay(sys, server);
  caf::scoped_actor self{sys};
  abg::msg::partition_chunk c;
  c.key = {"node", 1};
  c.total_rows = 2;
  c.embeddings = abg::msg::tensor::make({2, 3}, {1, 2, 3, 4, 5, 6});
  c.optim_state = abg::msg::tensor::make({2}, {0.5f, 0.25f});
  bool stored = false;
  self->request(relay, caf::infinite, abg::msg::put_atom::value, c).receive([&](bool ok) { stored = ok; },
                                                                           [&](caf::error&) {});
  REQUIRE(stored);
  auto get = [&](const auto& to) {
    abg::msg::partition_chunk out;
    self->request(to, caf::infinite, abg::msg::get_atom::value, c.key, uint64_t{0}, uint64_t{0}, uint64_t{2})
      .receive([&](abg::msg::partition_chunk& r) { out = std::move(r); }, [&](caf::error&) {});
    return out;
  };
  auto direct = get(server), relayed = get(relay);
  // the server shares a whole partition without copying; the relay's reply
  // was rebuilt from bytes (the put went through bytes too)
  REQUIRE(direct.embeddings.data);
  REQUIRE(relayed.embeddings.data);
  CHECK(direct.embeddings.data != relayed.embeddings.data);
  CHECK(direct.embeddings.data != c.embeddings.data);
  CHECK(relayed.embeddings == c.embeddings);
  CHECK(relayed.optim_state == c.optim_state);
  CHECK(relayed.key == c.key);
  self->send_exit(relay, caf::exit_reason::user_shutdown); // linked: stops the server too
}
