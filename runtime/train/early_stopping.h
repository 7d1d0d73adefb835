// early_stopping (a PBG config key: "stop training when the validation loss
// increases"): the held-out edges' loss after training (eval_fraction), per
// epoch, and the decision to stop once an epoch's loss rose above the one
// before it. A resumed run replays training_stats.json, so a run that stopped
// early stays stopped and one killed mid-epoch compares the same numbers.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>

#include "abg/error.h"
#include "abg/eval/metrics.h"

namespace abg::train {

class early_stopping {
public:
  /// The held-out evaluation after training, of one iteration of `epoch`.
  void add(std::int64_t epoch, const eval::metrics& after);

  /// Per-edge held-out loss of an epoch; none when nothing was added.
  std::optional<double> loss(std::int64_t epoch) const;

  struct rise {
    std::int64_t epoch = 0; // the epoch whose loss rose
    double previous = 0, loss = 0;
  };
  /// The first of epochs [1, complete) whose loss is above the previous epoch's.
  std::optional<rise> first_rise(std::int64_t complete) const;

  /// (epoch, edge path, edge chunk) -> iteration index.
  using iteration_of_fn = std::function<std::int64_t(std::int64_t epoch, std::int64_t edge_path, std::int64_t chunk)>;
  /// Adds the committed iterations [0, iterations) from a training_stats.json
  /// (one JSON object per line with epoch, edge_path, edge_chunk and
  /// eval_stats_after {loss, count}). A later line for the same iteration
  /// replaces an earlier one (a resumed run writes it again). A missing file
  /// adds nothing; an unreadable line is an error naming the file and line.
  expected<void> replay(const std::filesystem::path& file, std::int64_t iterations, const iteration_of_fn& iteration_of);

private:
  struct sums {
    double loss = 0;
    std::uint64_t count = 0;
  };
  void add(std::int64_t epoch, const sums& s);
  std::map<std::int64_t, sums> epochs_;
};

} // namespace abg::train
