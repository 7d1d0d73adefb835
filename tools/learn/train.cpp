// `abg train CONFIG [-p key=value]...`
#include <atomic>
#include <chrono>
#include <csignal>

#include "abg/cluster/train.h"
#include "tools/config_options.h"
#include "tools/learn/commands.h"
#include "tools/progress.h"

namespace abg::tools {

namespace {

std::atomic<bool> stop_requested{false};
std::atomic<int> stop_signal{0};

extern "C" void on_stop_signal(int signo) {
  stop_signal = signo;
  stop_requested = true;
}

void run(const config_args& args, int& exit_code) {
  auto cfg = load_config_or_report(args);
  if (!cfg) {
    exit_code = 1;
    return;
  }
  std::signal(SIGINT, on_stop_signal);
  std::signal(SIGTERM, on_stop_signal);
  progress_display display("edges");
  cluster::train_callbacks cb;
  cb.log = [&](std::string_view line) {
    display.finish();
    fmt::print(stderr, "{}\n", line);
  };
  std::string phase, shown;
  auto started = std::chrono::steady_clock::now();
  cb.bucket_done = [&](std::int64_t done, std::int64_t total, std::int64_t edges, double iteration_seconds) {
    double now = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    if (shown != phase) { // rates count from the iteration's start
      display.update(phase, 0, now - iteration_seconds, 0.0);
      shown = phase;
    }
    display.update(phase, static_cast<std::uint64_t>(edges), now,
                   static_cast<double>(done) / static_cast<double>(std::max<std::int64_t>(total, 1)));
  };
  cb.iteration_done = [&](const cluster::iteration_report& r) {
    display.finish();
    fmt::print(stderr,
               "epoch {} edge path {} chunk {}: trained {} edges in {} bucket(s) in {:.2f} s ({} edges/s), loss "
               "{:.6f}{}; checkpoint version {}\n",
               r.epoch, r.edge_path, r.edge_chunk, r.edges, r.buckets, r.seconds,
               human_count(r.seconds > 0 ? static_cast<double>(r.edges) / r.seconds : 0.0), r.loss,
               r.eval_before.count > 0
                 ? fmt::format("; {} held-out edges: mrr {:.4f} -> {:.4f}, hits@10 {:.4f} -> {:.4f}, auc {:.4f} -> {:.4f}",
                               r.eval_before.count, r.eval_before.mrr(), r.eval_after.mrr(),
                               r.eval_before.hits_at_10(), r.eval_after.hits_at_10(), r.eval_before.auc(),
                               r.eval_after.auc())
                 : std::string{},
               r.checkpoint_version);
    phase = fmt::format("iteration {}/{}", r.iteration + 2, r.iterations);
  };
  phase = "training";
  cluster::train_options options;
  if (cfg->seed)
    options.seed = static_cast<std::uint64_t>(*cfg->seed);
  options.stop = &stop_requested;
  auto summary = cluster::run_training(*cfg, to_toml(*cfg), options, cb);
  display.finish();
  if (!summary) {
    fmt::print(stderr, "error: {}\n", summary.error().message);
    exit_code = 1;
    return;
  }
  auto& s = *summary;
  fmt::print(stderr, "seed {}{}\n", s.seed, cfg->seed ? "" : " (random; set `seed` in the config to repeat it)");
  fmt::print(stderr,
             "{} {} iteration(s){}{} in {:.1f} s: {} edges ({} edges/s); last committed checkpoint: version {} in {}\n",
             s.stopped ? "stopped after" : "trained", s.iterations_run,
             s.first_iteration > 0 ? fmt::format(" (resumed at iteration {})", s.first_iteration) : "",
             s.early_stopped_epoch ? fmt::format(", early_stopping after epoch {}", *s.early_stopped_epoch + 1) : "",
             s.seconds,
             s.edges, human_count(s.seconds > 0 ? static_cast<double>(s.edges) / s.seconds : 0.0),
             s.checkpoint_version, cfg->checkpoint_path);
  if (s.stopped) // the shell convention: 128 + the signal (130 for SIGINT, 143 for SIGTERM)
    exit_code = 128 + stop_signal.load();
}

} // namespace

void register_train_command(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<config_args>();
  auto* cmd = app.add_subcommand(
    "train", "Train embeddings as configured, like PBG's torchbiggraph_train: for each epoch, edge path and edge "
             "chunk, every bucket through the actor graph (lock server, partition server, trainers; num_machines "
             "machines simulated in this process, sharing parameters through parameter servers), then a checkpoint. "
             "A run started again resumes from the last committed checkpoint; with early_stopping it ends after "
             "the first epoch whose held-out loss rose. SIGINT/SIGTERM stop between batches and keep the last "
             "committed one (the interrupted iteration is redone on resume), then exit with status 128 + the signal "
             "number (130, 143).");
  add_config_args(*cmd, *args);
  cmd->callback([args, &exit_code] { run(*args, exit_code); });
}

} // namespace abg::tools
