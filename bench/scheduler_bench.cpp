// The lock server's choice of the next bucket on a large grid: P x P buckets
// (default P = 4096, 16.7 M buckets), trainers following the protocol
// (acquire, write back what the grant drops, release) round-robin, every
// acquire timed. Prints one line per scenario (mean, 99th percentile and
// largest acquire time, and the time to start the epoch), and for scale the
// time of one plain scan of the whole order, what each acquire cost before
// the pending positions were indexed. The last scenario has a partition
// buffer, so that each grant also reserves the trainer's next bucket. bench/scheduler_bench.sh appends the
// lines to bench/results.md.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "runtime/schedule/bucket_scheduler.h"

using namespace abg::schedule;
using clock_type = std::chrono::steady_clock;

namespace {

double ms_since(clock_type::time_point t0) {
  return std::chrono::duration<double, std::milli>(clock_type::now() - t0).count();
}

void scenario(int32_t parts, int32_t trainers, bucket_order order, int32_t epoch, int acquires, int32_t capacity = 0) {
  scheduler_config cfg{.nparts_lhs = parts, .nparts_rhs = parts, .order = order, .seed = 1,
                       .shared_partitions = true, .num_trainers = trainers, .buffer_capacity = capacity};
  bucket_scheduler s(cfg);
  auto t0 = clock_type::now();
  s.start_epoch(epoch);
  const double start_ms = ms_since(t0);
  std::map<trainer_id, std::optional<bucket>> training;
  std::map<trainer_id, std::map<part_key, uint64_t>> holds;
  std::vector<double> times;
  for (int i = 0, t = 0; static_cast<int>(times.size()) < acquires && i < 10 * acquires; ++i, t = (t + 1) % trainers) {
    const auto id = static_cast<trainer_id>(t);
    if (training[id]) {
      s.release(id, *training[id]);
      training[id].reset();
      continue;
    }
    auto a0 = clock_type::now();
    auto g = s.acquire(id);
    times.push_back(ms_since(a0));
    std::vector<part_version> written;
    for (auto& k : g.drop) written.push_back({k, holds[id][k] + 1});
    if (!written.empty()) s.unlock(id, written);
    for (auto& k : g.drop) holds[id].erase(k);
    if (g.what != grant::kind::bucket) continue;
    for (auto& f : g.fetch) holds[id][f.key] = f.version;
    training[id] = g.assigned;
  }
  std::sort(times.begin(), times.end());
  double sum = 0;
  for (auto x : times) sum += x;
  fmt::print("scheduler: P = {} ({} buckets), {} trainer(s){}, {} order, epoch {}{}: {} acquires, mean {:.4f} ms, "
             "99th percentile {:.4f} ms, largest {:.4f} ms; start_epoch {:.0f} ms\n",
             parts, static_cast<std::int64_t>(parts) * parts, trainers,
             capacity > 0 ? fmt::format(" with buffer_capacity = {} (each grant reserves the next bucket)", capacity) : "",
             to_string(order), epoch,
             epoch == 0 ? " (first epoch: initialised sides only)" : "", times.size(), sum / static_cast<double>(times.size()),
             times[times.size() * 99 / 100], times.back(), start_ms);
  // One plain scan of the order, as the choice cost before (allowed() on every bucket).
  auto s0 = clock_type::now();
  std::size_t allowed = 0;
  for (const auto& b : s.order()) allowed += s.allowed(b, 0) ? 1 : 0;
  fmt::print("scheduler: one scan of all {} buckets (the choice before): {:.1f} ms ({} allowed)\n", s.num_buckets(),
             ms_since(s0), allowed);
  std::fflush(stdout);
}

} // namespace

int main(int argc, char** argv) {
  CLI::App app{"Times the lock server's bucket choice on a P x P grid."};
  int32_t parts = 4096;
  int acquires = 20000;
  app.add_option("--parts", parts, "partitions per side")->capture_default_str();
  app.add_option("--acquires", acquires, "acquires timed per scenario")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  scenario(parts, 1, bucket_order::inside_out, 0, acquires);
  scenario(parts, 1, bucket_order::random, 1, acquires);
  scenario(parts, 4, bucket_order::random, 0, acquires);
  scenario(parts, 4, bucket_order::inside_out, 1, acquires);
  scenario(parts, 4, bucket_order::inside_out, 1, acquires, 4);
  return 0;
}
