// run_training with eval_fraction: per bucket the same edges are held out
// every epoch, never trained, ranked before and after training (reported per
// bucket, per iteration and in training_stats.json); eval_fraction = 0 trains
// every edge and reports nothing; a stop during evaluation ends the run;
// early_stopping ends training once an epoch's held-out loss rose.
// LibTorch (through holdout.h) first: its glog CHECK macro must not replace doctest's.
#include "abg/model/holdout.h"

#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "abg/node/run.h"
#include "abg/config.h"
#include "abg/import.h"
#include "abg/storage/edge_manifest.h"
#include "tests/test_util.h"

namespace fs = std::filesystem;
using namespace abg;
using abg::node::bucket_eval_report;
using abg::node::iteration_report;
using abg::node::train_callbacks;

namespace {

constexpr int kGroups = 64, kGroupSize = 5, kLinks = 4;
constexpr std::int64_t kEdges = kGroups * kGroupSize * kLinks; // 1280

// 64 groups of 5 nodes, each node linked to the 4 others of its group: the
// held-out edges of a group are predictable from its trained ones.
struct graph {
  abg::test::scratch_dir dir;
  std::string toml(double eval_fraction, int epochs) const {
    return fmt::format(R"(entity_path = "{0}/ent"
edge_paths = ["{0}/edges"]
checkpoint_path = "{0}/model"
dimension = 16
comparator = "dot"
loss_fn = "softmax"
global_emb = false
lr = 0.1
batch_size = 100
num_batch_negs = 20
num_uniform_negs = 20
num_epochs = {1}
eval_fraction = {2}
eval_num_batch_negs = 50
eval_num_uniform_negs = 50
workers = 1
seed = 5
[entities.node]
num_partitions = 2
[[relations]]
name = "r"
lhs = "node"
rhs = "node"
)",
                       dir.path().string(), epochs, eval_fraction);
  }
  config load(double eval_fraction, int epochs) const {
    auto c = parse_config(toml(eval_fraction, epochs), "test.toml");
    REQUIRE_MESSAGE(c, (c ? "" : c.error().message));
    return c->value;
  }
  // random_links: as many edges between random nodes instead (nothing to
  // learn about held-out edges: training only overfits).
  explicit graph(bool random_links = false) {
    std::string text;
    std::uint64_t x = 12345;
    auto next = [&] { return (x = x * 6364136223846793005ULL + 1442695040888963407ULL) >> 33; };
    for (int g = 0; g < kGroups; ++g)
      for (int i = 0; i < kGroupSize; ++i)
        for (int k = 1; k <= kLinks; ++k) {
          constexpr auto nodes = static_cast<std::uint64_t>(kGroups * kGroupSize);
          if (random_links)
            text += fmt::format("n{}\tn{}\n", next() % nodes, next() % nodes);
          else
            text += fmt::format("n{}\tn{}\n", g * kGroupSize + i, g * kGroupSize + (i + k) % kGroupSize);
        }
    abg::test::write_text(dir / "edges.tsv", text);
    import_options o;
    o.inputs = {dir / "edges.tsv"};
    o.lhs_col = 0;
    o.rhs_col = 1;
    auto imported = run_import(load(0.1, 1), o);
    REQUIRE_MESSAGE(imported, (imported ? "" : imported.error().message));
    REQUIRE(imported->edges == static_cast<std::uint64_t>(kEdges));
  }
  std::map<std::pair<int, int>, std::int64_t> bucket_edges() const {
    auto m = storage::read_edge_manifest(dir / "edges");
    REQUIRE(m);
    std::map<std::pair<int, int>, std::int64_t> out;
    for (auto& b : m->buckets)
      out[{static_cast<int>(b.lhs), static_cast<int>(b.rhs)}] = static_cast<std::int64_t>(b.edges);
    return out;
  }
  std::vector<nlohmann::json> stats_lines() const {
    std::vector<nlohmann::json> out;
    std::ifstream in(dir / "model" / "training_stats.json");
    for (std::string line; std::getline(in, line);)
      out.push_back(nlohmann::json::parse(line));
    return out;
  }
};

struct recorded {
  std::mutex m;
  std::vector<bucket_eval_report> buckets; // held_out copied below
  std::map<std::pair<int, int>, std::vector<std::vector<std::int64_t>>> held_out; // per bucket, per epoch
  std::vector<iteration_report> iterations;
  std::vector<std::string> log;
  train_callbacks callbacks() {
    train_callbacks cb;
    cb.log = [this](std::string_view line) {
      std::lock_guard lock(m);
      log.emplace_back(line);
    };
    cb.iteration_done = [this](const iteration_report& r) { iterations.push_back(r); };
    cb.bucket_evaluated = [this](const bucket_eval_report& r) {
      std::lock_guard lock(m);
      buckets.push_back(r);
      buckets.back().held_out = {};
      held_out[{r.lhs, r.rhs}].emplace_back(r.held_out.begin(), r.held_out.end());
    };
    return cb;
  }
  std::size_t log_lines_with(std::string_view text) {
    std::size_t n = 0;
    for (auto& l : log)
      n += l.find(text) != std::string::npos;
    return n;
  }
};

} // namespace

TEST_CASE("eval_fraction: the same edges held out every epoch, never trained, ranked before and after") {
  graph g;
  const double fraction = 0.1;
  const int epochs = 4;
  auto cfg = g.load(fraction, epochs);
  const auto per_bucket = g.bucket_edges();
  REQUIRE(per_bucket.size() == 4);
  std::int64_t held_total = 0;
  for (auto& [b, n] : per_bucket)
    held_total += static_cast<std::int64_t>(static_cast<double>(n) * fraction); // PBG: int(n * eval_fraction)
  REQUIRE(held_total > 100);

  recorded rec;
  node::train_options options;
  options.seed = 5;
  auto summary = node::run_simulation(cfg, g.toml(fraction, epochs), options, rec.callbacks());
  REQUIRE_MESSAGE(summary, (summary ? "" : summary.error().message));
  CHECK(summary->iterations_run == epochs);
  CHECK(summary->edges == epochs * (kEdges - held_total));

  // Every bucket, every epoch: the same held-out indices, int(n * fraction)
  // of them, the ones the selection function picks for (seed, path, chunk,
  // bucket); the kernel got the other n - held out edges.
  REQUIRE(rec.buckets.size() == static_cast<std::size_t>(epochs) * per_bucket.size());
  for (auto& [b, n] : per_bucket) {
    auto& runs = rec.held_out[b];
    REQUIRE(runs.size() == static_cast<std::size_t>(epochs));
    const auto expected = train::held_out_indices(n, fraction, train::held_out_seed(5, 0, 0, b.first, b.second));
    CHECK(expected.size() == static_cast<std::size_t>(static_cast<double>(n) * fraction));
    for (auto& run : runs)
      CHECK(run == expected);
  }
  for (auto& r : rec.buckets) {
    const auto n = per_bucket.at({r.lhs, r.rhs});
    const auto held = static_cast<std::int64_t>(static_cast<double>(n) * fraction);
    CHECK(r.edges == n);
    CHECK(r.trained == n - held);
    CHECK(r.before.count == static_cast<std::uint64_t>(held));
    CHECK(r.after.count == static_cast<std::uint64_t>(held));
    CHECK(r.before.ranked == 2 * r.before.count); // both sides ranked
  }

  // Per iteration: trained edges, aggregate before/after metrics; training
  // improves the held-out ranking although those edges are never trained.
  REQUIRE(rec.iterations.size() == static_cast<std::size_t>(epochs));
  for (auto& it : rec.iterations) {
    CHECK(it.edges == kEdges - held_total);
    CHECK(it.eval_before.count == static_cast<std::uint64_t>(held_total));
    CHECK(it.eval_after.count == static_cast<std::uint64_t>(held_total));
    CHECK(it.eval_after.loss_count == static_cast<std::uint64_t>(held_total));
    // The iteration's totals come from the trainers' bucket_stats messages:
    // exactly the sums of its buckets' evaluations.
    eval::metrics before, after;
    for (auto& b : rec.buckets)
      if (b.iteration == it.iteration) {
        before.merge(b.before);
        after.merge(b.after);
      }
    CHECK(it.eval_before.reciprocal_sum == doctest::Approx(before.reciprocal_sum).epsilon(1e-12));
    CHECK(it.eval_after.rank_sum == after.rank_sum);
    CHECK(it.eval_after.loss_sum == doctest::Approx(after.loss_sum).epsilon(1e-12));
  }
  CHECK(rec.iterations.front().eval_after.mrr() > rec.iterations.front().eval_before.mrr());
  CHECK(rec.iterations.front().eval_after.loss() < rec.iterations.front().eval_before.loss());
  // The first bucket is ranked by the untrained model: about chance.
  REQUIRE(rec.buckets.front().epoch == 0);
  const auto untrained = rec.buckets.front().before.mrr();
  const auto last_after = rec.iterations.back().eval_after.mrr();
  MESSAGE("held-out MRR: ", untrained, " untrained, ", last_after, " after ", epochs, " epochs");
  CHECK(untrained < 0.2);
  CHECK(last_after > 0.4);
  CHECK(last_after > 3 * untrained);
  CHECK(rec.iterations.back().eval_after.hits_at_10() > rec.buckets.front().before.hits_at_10());
  CHECK(rec.iterations.back().eval_after.auc() > rec.buckets.front().before.auc());

  // PBG's log lines, per bucket.
  const auto buckets_trained = static_cast<std::size_t>(epochs) * per_bucket.size();
  CHECK(rec.log_lines_with("Stats before training: loss: ") == buckets_trained);
  CHECK(rec.log_lines_with("Stats after training: loss: ") == buckets_trained);
  CHECK(rec.log_lines_with(" , pos_rank: ") == 2 * buckets_trained);
  CHECK(rec.log_lines_with(" , mrr: ") == 2 * buckets_trained);
  CHECK(rec.log_lines_with("Eval 2*") == buckets_trained);

  // training_stats.json: the iteration's aggregate before and after.
  auto lines = g.stats_lines();
  REQUIRE(lines.size() == static_cast<std::size_t>(epochs));
  for (std::size_t i = 0; i < lines.size(); ++i) {
    REQUIRE(lines[i].contains("eval_stats_before"));
    REQUIRE(lines[i].contains("eval_stats_after"));
    CHECK(lines[i]["edges"] == kEdges - held_total);
    CHECK(lines[i]["eval_stats_before"]["count"] == held_total);
    CHECK(lines[i]["eval_stats_after"]["count"] == held_total);
    CHECK(lines[i]["eval_stats_before"]["mrr"].get<double>() == doctest::Approx(rec.iterations[i].eval_before.mrr()));
    CHECK(lines[i]["eval_stats_after"]["mrr"].get<double>() == doctest::Approx(rec.iterations[i].eval_after.mrr()));
    for (auto key : {"loss", "mrr", "mean_rank", "hits@1", "hits@3", "hits@10", "hits@50", "auc"})
      CHECK(lines[i]["eval_stats_after"][key].is_number());
    CHECK(lines[i]["eval_stats_after"]["loss"].get<double>() == doctest::Approx(rec.iterations[i].eval_after.loss()));
  }

  // Resuming for more epochs holds out the same edges again.
  recorded more;
  auto cfg2 = g.load(fraction, epochs + 1);
  auto resumed = node::run_simulation(cfg2, g.toml(fraction, epochs + 1), options, more.callbacks());
  REQUIRE_MESSAGE(resumed, (resumed ? "" : resumed.error().message));
  CHECK(resumed->iterations_run == 1);
  REQUIRE(more.buckets.size() == per_bucket.size());
  for (auto& [b, runs] : more.held_out)
    CHECK(runs.front() == rec.held_out[b].front());
}

TEST_CASE("eval_fraction = 0: every edge trained, no evaluation reported") {
  graph g;
  recorded rec;
  node::train_options options;
  options.seed = 5;
  auto summary = node::run_simulation(g.load(0.0, 2), g.toml(0.0, 2), options, rec.callbacks());
  REQUIRE_MESSAGE(summary, (summary ? "" : summary.error().message));
  CHECK(summary->edges == 2 * kEdges);
  CHECK(rec.buckets.empty());
  CHECK(rec.log_lines_with("Stats") == 0);
  REQUIRE(rec.iterations.size() == 2);
  for (auto& it : rec.iterations) {
    CHECK(it.edges == kEdges);
    CHECK(it.eval_before.count == 0);
    CHECK(it.eval_after.count == 0);
  }
  auto lines = g.stats_lines();
  REQUIRE(lines.size() == 2);
  for (auto& l : lines) {
    CHECK(l["edges"] == kEdges);
    CHECK_FALSE(l.contains("eval_stats_before"));
    CHECK_FALSE(l.contains("eval_stats_after"));
  }
}

TEST_CASE("eval_fraction: a bucket too small to hold out an edge is trained whole, not evaluated") {
  graph g;
  recorded rec;
  node::train_options options;
  options.seed = 5;
  // 0.001 of ~320 edges rounds down to 0 in every bucket.
  auto summary = node::run_simulation(g.load(0.001, 1), g.toml(0.001, 1), options, rec.callbacks());
  REQUIRE_MESSAGE(summary, (summary ? "" : summary.error().message));
  CHECK(summary->edges == kEdges);
  CHECK(rec.buckets.empty());
  REQUIRE(rec.iterations.size() == 1);
  CHECK(rec.iterations[0].eval_before.count == 0);
  CHECK_FALSE(g.stats_lines().at(0).contains("eval_stats_before"));
}

TEST_CASE("eval_fraction: a stop during evaluation ends the run without committing the iteration") {
  graph g;
  std::atomic<bool> stop{false};
  recorded rec;
  auto cb = rec.callbacks();
  cb.log = [&](std::string_view line) {
    {
      std::lock_guard lock(rec.m);
      rec.log.emplace_back(line);
    }
    // The signal arrives during the evaluation before training: the node
    // turns it into a message to the coordinator, which stops the trainers
    // while this bucket is still evaluating.
    if (line.find("Stats before training") != std::string_view::npos && !stop.exchange(true))
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
  };
  node::train_options options;
  options.seed = 5;
  options.stop = &stop;
  auto summary = node::run_simulation(g.load(0.1, 3), g.toml(0.1, 3), options, cb);
  REQUIRE_MESSAGE(summary, (summary ? "" : summary.error().message));
  CHECK(summary->stopped);
  CHECK(summary->iterations_run == 0);
  CHECK(rec.buckets.empty()); // stopped before its evaluation after training: nothing reported
  CHECK(rec.log_lines_with("Stats after training") == 0);
  CHECK(rec.iterations.empty());
  CHECK(g.stats_lines().empty());
}

TEST_CASE("eval_fraction > 0 without evaluation negatives is refused up front") {
  graph g;
  auto toml = g.toml(0.1, 1);
  auto c = parse_config(toml, "test.toml", {"eval_num_batch_negs=0", "eval_num_uniform_negs=0"});
  REQUIRE(c);
  auto summary = node::run_simulation(c->value, toml, {}, {});
  REQUIRE_FALSE(summary);
  CHECK(summary.error().message.find("eval_num_batch_negs") != std::string::npos);
}

TEST_CASE("early_stopping: training stops after the first epoch whose held-out loss rose, and stays stopped") {
  graph g(true);
  constexpr int epochs = 30;
  auto toml = g.toml(0.1, epochs);
  auto load = [&](bool early) {
    auto c = parse_config(toml, "test.toml", {early ? "early_stopping=true" : "early_stopping=false"});
    REQUIRE_MESSAGE(c, (c ? "" : c.error().message));
    return c->value;
  };
  recorded rec;
  node::train_options options;
  options.seed = 5;
  auto summary = node::run_simulation(load(true), toml, options, rec.callbacks());
  REQUIRE_MESSAGE(summary, (summary ? "" : summary.error().message));
  REQUIRE(summary->early_stopped_epoch);
  const auto stopped = *summary->early_stopped_epoch;
  MESSAGE("random links: early_stopping after epoch ", stopped + 1, " of ", epochs);
  CHECK(stopped >= 1);
  CHECK(stopped < epochs - 1);
  CHECK(summary->iterations_run == stopped + 1); // one iteration per epoch here
  CHECK(rec.log_lines_with("early_stopping: held-out loss") == 1);
  // The decision in numbers: per epoch, the held-out loss after training
  // (training_stats.json); the last committed epoch is the one that rose.
  auto lines = g.stats_lines();
  REQUIRE(lines.size() == static_cast<std::size_t>(stopped + 1));
  std::vector<double> loss;
  for (auto& l : lines)
    loss.push_back(l["eval_stats_after"]["loss"].get<double>());
  for (std::size_t e = 1; e + 1 < loss.size(); ++e)
    CHECK(loss[e] <= loss[e - 1]);
  CHECK(loss.back() > loss[loss.size() - 2]);

  // Started again, the run replays training_stats.json and trains nothing.
  recorded again;
  auto resumed = node::run_simulation(load(true), toml, options, again.callbacks());
  REQUIRE_MESSAGE(resumed, (resumed ? "" : resumed.error().message));
  CHECK(resumed->iterations_run == 0);
  CHECK(resumed->early_stopped_epoch == stopped);
  CHECK(again.log_lines_with("already stopped after epoch") == 1);
  CHECK(g.stats_lines().size() == lines.size());

  // Without early_stopping the same checkpoint goes on training.
  recorded more;
  auto go_on = node::run_simulation(load(false), toml, options, more.callbacks());
  REQUIRE_MESSAGE(go_on, (go_on ? "" : go_on.error().message));
  CHECK(go_on->iterations_run == epochs - (stopped + 1));
  CHECK_FALSE(go_on->early_stopped_epoch);
}

TEST_CASE("early_stopping: an unreadable training_stats.json line is an error naming the file and line") {
  graph g(true);
  auto toml = g.toml(0.1, 4);
  auto c = parse_config(toml, "test.toml", {"early_stopping=true", "num_epochs=1"});
  REQUIRE(c);
  node::train_options options;
  options.seed = 5;
  REQUIRE(node::run_simulation(c->value, toml, options));
  abg::test::write_text(g.dir / "model" / "training_stats.json", "{\"epoch\": 0}\n");
  auto c4 = parse_config(toml, "test.toml", {"early_stopping=true"});
  REQUIRE(c4);
  auto r = node::run_simulation(c4->value, toml, options);
  REQUIRE_FALSE(r);
  CHECK(r.error().message.find("training_stats.json line 1: no integer 'edge_path'") != std::string::npos);
}

TEST_CASE("resuming a checkpoint of another model is refused, naming the difference and the fix once") {
  graph g;
  auto toml = g.toml(0.1, 1);
  auto c = parse_config(toml, "test.toml");
  REQUIRE(c);
  node::train_options options;
  options.seed = 5;
  REQUIRE(node::run_simulation(c->value, toml, options));
  auto other = parse_config(toml, "test.toml", {"num_epochs=2", "relations.0.operator=translation"});
  REQUIRE(other);
  auto r = node::run_simulation(other->value, toml, options);
  REQUIRE_FALSE(r);
  const auto& m = r.error().message;
  CHECK(m.find("holds a checkpoint of another model") != std::string::npos);
  CHECK(m.find("relation 0 was") != std::string::npos);
  const auto fix = m.find("use a new checkpoint_path");
  REQUIRE(fix != std::string::npos);
  CHECK(m.find("use a new checkpoint_path", fix + 1) == std::string::npos);
}
