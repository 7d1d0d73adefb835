// param_sharer: machines' copies of shared tensors meet at the parameter
// servers. Each pushes what it changed since its last exchange; after every
// machine has exchanged twice, all copies equal the start plus every
// machine's changes, whatever the shard or slice, also through wire relays
// and from the background loop.
// LibTorch first: its glog CHECK macro must not replace doctest's.
#include <torch/torch.h>

#include <doctest/doctest.h>

#include <chrono>
#include <thread>

#include "actors/wire_relay.h"
#include "actors/param_sharer.h"
#include "actors/spawn.h"

using abg::actors::param_sharer;

constexpr auto kDeadline = std::chrono::seconds(60);

namespace {

struct servers {
  caf::actor_system_config cfg;
  std::unique_ptr<caf::actor_system> sys;
  std::vector<abg::msg::parameter_server_actor> shards;
  servers(int n, bool wire) {
    abg::msg::register_message_types(cfg);
    cfg.set("logger.console", caf::atom("none"));
    sys = std::make_unique<caf::actor_system>(cfg);
    for (int i = 0; i < n; ++i) {
      auto ps = abg::actors::spawn_parameter_server(*sys, "ps " + std::to_string(i));
      shards.push_back(wire ? abg::actors::spawn_wire_relay(*sys, ps) : ps);
    }
  }
  ~servers() {
    caf::scoped_actor self{*sys};
    for (auto& s : shards)
      self->send_exit(s, caf::exit_reason::user_shutdown);
  }
};

} // namespace

TEST_CASE("param_sharer: every machine ends with the start plus all machines' changes") {
  for (bool wire : {false, true}) {
    CAPTURE(wire);
    servers ps(3, wire);
    // A vector, and a table over several slices (so over several shards).
    const auto big = param_sharer::slice_floats * 2 + 7;
    auto start_small = torch::arange(5, torch::kFloat);
    auto start_big = torch::full({big / 7, 7}, 0.5f);
    REQUIRE(param_sharer::initialise(*ps.sys, ps.shards, "small", start_small.data_ptr<float>(), start_small.numel(), kDeadline));
    REQUIRE(param_sharer::initialise(*ps.sys, ps.shards, "big", start_big.data_ptr<float>(), start_big.numel(), kDeadline));
    std::vector<torch::Tensor> small, large;
    std::vector<std::unique_ptr<param_sharer>> machines;
    for (int m = 0; m < 3; ++m) {
      small.push_back(start_small.clone());
      large.push_back(start_big.clone());
      machines.push_back(std::make_unique<param_sharer>(*ps.sys, ps.shards, kDeadline));
      machines.back()->add("small", small.back());
      machines.back()->add("big", large.back());
    }
    // Machine m changes element m of the vector and the last row of the table.
    for (int m = 0; m < 3; ++m) {
      small[m][m] += 10.0f * static_cast<float>(m + 1);
      large[m][-1][m] += 1.0f;
    }
    // A machine that joins late with an old copy is brought up to date, never pushes it again.
    auto late_small = start_small.clone();
    for (int round = 0; round < 2; ++round)
      for (auto& m : machines)
        REQUIRE(m->sync());
    auto expect_small = start_small.clone();
    expect_small[0] += 10.0f;
    expect_small[1] += 20.0f;
    expect_small[2] += 30.0f;
    auto expect_big = start_big.clone();
    expect_big[-1].narrow(0, 0, 3) += 1.0f;
    for (int m = 0; m < 3; ++m) {
      CHECK(torch::equal(small[m], expect_small));
      CHECK(torch::equal(large[m], expect_big));
      CHECK(machines[m]->rounds() == 2);
    }
    param_sharer late(*ps.sys, ps.shards, kDeadline);
    late.add("small", late_small);
    REQUIRE(late.sync());
    CHECK(torch::equal(late_small, expect_small));
    REQUIRE(machines[0]->sync());
    CHECK(torch::equal(small[0], expect_small)); // the late machine added nothing

    // The background loop exchanges on its own.
    small[1][4] += 1.0f;
    machines[1]->start(std::chrono::milliseconds(1));
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    auto rounds = machines[1]->rounds();
    while (machines[1]->rounds() < rounds + 3 && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    REQUIRE(machines[2]->sync());
    CHECK(small[2][4].item<float>() == 5.0f);
    CHECK_FALSE(machines[1]->failure());
  }
}

TEST_CASE("param_sharer: a server that is gone is an error naming the tensor, and the sharer stays failed") {
  servers ps(1, false);
  auto t = torch::zeros({4});
  REQUIRE(param_sharer::initialise(*ps.sys, ps.shards, "w", t.data_ptr<float>(), t.numel(), kDeadline));
  param_sharer s(*ps.sys, ps.shards, kDeadline);
  s.add("w", t);
  {
    caf::scoped_actor self{*ps.sys};
    self->send_exit(ps.shards[0], caf::exit_reason::user_shutdown);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  auto r = s.sync();
  REQUIRE_FALSE(r);
  CHECK(r.error().message.find("parameter server: cannot push w#0") != std::string::npos);
  CHECK(s.failure());
  CHECK_FALSE(s.sync());
}
