#include "tools/learn/train_output.h"

#include <fmt/format.h>

namespace abg::tools {

train_output::train_output(std::string prefix) : prefix_(std::move(prefix)) {}

node::train_callbacks train_output::callbacks() {
  node::train_callbacks cb;
  cb.log = [this](std::string_view line) {
    display_.finish();
    fmt::print(stderr, "{}{}\n", prefix_, line);
  };
  cb.bucket_done = [this](const node::bucket_report& r) { bucket_done(r); };
  cb.iteration_done = [this](const node::iteration_report& r) {
    display_.finish();
    fmt::print(stderr,
               "{}epoch {} edge path {} chunk {}: trained {} edges in {} bucket(s) in {:.2f} s ({} edges/s; kernels "
               "{:.2f} s, swapping partitions {:.2f} s{}), loss {:.6f}{}; checkpoint version {}\n",
               prefix_, r.epoch, r.edge_path, r.edge_chunk, r.edges, r.buckets, r.seconds,
               human_count(r.seconds > 0 ? static_cast<double>(r.edges) / r.seconds : 0.0), r.kernel_seconds,
               r.swap_seconds,
               r.read_ahead > 0 ? fmt::format("; {} of {} partition loads read ahead", r.read_ahead, r.loads)
                                : std::string{},
               r.loss,
               r.eval_before.count > 0
                 ? fmt::format("; {} held-out edges: mrr {:.4f} -> {:.4f}, hits@10 {:.4f} -> {:.4f}, auc {:.4f} -> {:.4f}",
                               r.eval_before.count, r.eval_before.mrr(), r.eval_after.mrr(),
                               r.eval_before.hits_at_10(), r.eval_after.hits_at_10(), r.eval_before.auc(),
                               r.eval_after.auc())
                 : std::string{},
               r.checkpoint_version);
    if (r.buckets > 1) print_trainers();
    trainers_.clear();
    phase_ = fmt::format("iteration {}/{}", r.iteration + 2, r.iterations);
  };
  return cb;
}

namespace {

std::string eta_text(double seconds) {
  if (seconds < 120) return fmt::format("{:.0f} s", seconds);
  if (seconds < 7200) return fmt::format("{:.0f} min", seconds / 60);
  return fmt::format("{:.1f} h", seconds / 3600);
}

} // namespace

void train_output::bucket_done(const node::bucket_report& r) {
  const double now = std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
  if (!first_iteration_) {
    first_iteration_ = r.iteration;
    training_start_ = now - r.iteration_seconds; // not the start-up and the joining before it
  }
  auto& t = trainers_[r.trainer];
  ++t.buckets;
  t.edges += r.edges;
  t.seconds += r.seconds;
  t.loss += r.loss;
  // The run's remaining time, at this process's pace since training began.
  const double part = static_cast<double>(r.done) / static_cast<double>(std::max<std::int64_t>(r.total, 1));
  const double fraction = (static_cast<double>(r.iteration - *first_iteration_) + part) /
                          static_cast<double>(std::max<std::int64_t>(r.iterations - *first_iteration_, 1));
  const auto eta = fraction > 0 ? eta_text((now - training_start_) * (1 - fraction) / fraction) : std::string("?");
  const double loss = r.edges > 0 ? r.loss / static_cast<double>(r.edges) : 0.0;
  if (!display_.terminal()) {
    fmt::print(stderr, "{}iteration {}/{} bucket ({}, {}) trainer {}: {} edges, {} edges/s, loss {:.4f}; {} of {} buckets, "
                       "ETA {}\n",
               prefix_, r.iteration + 1, r.iterations, r.lhs, r.rhs, r.trainer, r.edges,
               human_count(r.seconds > 0 ? static_cast<double>(r.edges) / r.seconds : 0.0), loss, r.done, r.total, eta);
    return;
  }
  if (shown_ != phase_) { // rates count from the iteration's start
    display_.update(phase_, 0, now - r.iteration_seconds, 0.0);
    shown_ = phase_;
  }
  display_.update(phase_, static_cast<std::uint64_t>(r.iteration_edges), now, part,
                  fmt::format(", loss {:.4f}, ETA {}", loss, eta));
}

// The end of an iteration of several buckets: what each trainer did in it.
void train_output::print_trainers() {
  fmt::print(stderr, "{}  {:>7} {:>8} {:>12} {:>12} {:>10}\n", prefix_, "trainer", "buckets", "edges", "edges/s",
             "loss/edge");
  for (const auto& [id, t] : trainers_)
    fmt::print(stderr, "{}  {:>7} {:>8} {:>12} {:>12} {:>10.4f}\n", prefix_, id, t.buckets, t.edges,
               human_count(t.seconds > 0 ? static_cast<double>(t.edges) / t.seconds : 0.0),
               t.edges > 0 ? t.loss / static_cast<double>(t.edges) : 0.0);
}

void train_output::summary(const node::train_summary& s, const config& cfg) {
  display_.finish();
  fmt::print(stderr, "{}seed {}{}\n", prefix_, s.seed, cfg.seed ? "" : " (random; set `seed` in the config to repeat it)");
  fmt::print(stderr,
             "{}{} {} iteration(s){}{} in {:.1f} s: {} edges ({} edges/s); last committed checkpoint: version {} in {}\n",
             prefix_, s.stopped ? "stopped after" : s.stopped_by_console ? "stopped by an admin console after" : "trained",
             s.iterations_run,
             s.first_iteration > 0 ? fmt::format(" (resumed at iteration {})", s.first_iteration) : "",
             s.early_stopped_epoch ? fmt::format(", early_stopping after epoch {}", *s.early_stopped_epoch + 1) : "",
             s.seconds, s.edges, human_count(s.seconds > 0 ? static_cast<double>(s.edges) / s.seconds : 0.0),
             s.checkpoint_version, cfg.checkpoint_path);
  if (s.buckets_per_trainer.size() > 1) {
    std::string shares;
    for (std::size_t t = 0; t < s.buckets_per_trainer.size(); ++t)
      shares += fmt::format("{}trainer {}: {}", t ? ", " : "", t, s.buckets_per_trainer[t]);
    fmt::print(stderr, "{}buckets trained per trainer: {}{}\n", prefix_, shares,
               s.rollbacks ? fmt::format("; {} rollback(s) to the last commit", s.rollbacks) : "");
  }
}

} // namespace abg::tools
