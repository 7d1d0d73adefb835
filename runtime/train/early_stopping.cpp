#include "runtime/train/early_stopping.h"

#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

namespace abg::train {

void early_stopping::add(std::int64_t epoch, const eval::metrics& after) {
  add(epoch, sums{after.loss_sum, after.loss_count});
}

void early_stopping::add(std::int64_t epoch, const sums& s) {
  if (s.count == 0)
    return;
  auto& e = epochs_[epoch];
  e.loss += s.loss;
  e.count += s.count;
}

std::optional<double> early_stopping::loss(std::int64_t epoch) const {
  auto i = epochs_.find(epoch);
  if (i == epochs_.end() || i->second.count == 0)
    return std::nullopt;
  return i->second.loss / static_cast<double>(i->second.count);
}

std::optional<early_stopping::rise> early_stopping::first_rise(std::int64_t complete) const {
  for (std::int64_t e = 1; e < complete; ++e) {
    auto previous = loss(e - 1), current = loss(e);
    if (previous && current && *current > *previous)
      return rise{e, *previous, *current};
  }
  return std::nullopt;
}

expected<void> early_stopping::replay(const std::filesystem::path& file, std::int64_t iterations,
                                      const iteration_of_fn& iteration_of) {
  std::ifstream in(file);
  if (!in)
    return {};
  struct entry {
    std::int64_t epoch = 0;
    sums after;
  };
  std::map<std::int64_t, entry> by_iteration;
  std::string text;
  for (std::int64_t number = 1; std::getline(in, text); ++number) {
    if (text.empty())
      continue;
    auto j = nlohmann::json::parse(text, nullptr, false);
    auto bad = [&](std::string_view what) {
      return fail("{} line {}: {}; the file holds one JSON object per committed iteration as `abg train` writes "
                  "it: restore it, or remove it to resume without early_stopping's history",
                  file.string(), number, what);
    };
    if (j.is_discarded() || !j.is_object())
      return bad("not a JSON object");
    for (auto key : {"epoch", "edge_path", "edge_chunk"})
      if (!j.contains(key) || !j[key].is_number_integer())
        return bad(std::string("no integer '") + key + "'");
    const auto it = iteration_of(j["epoch"], j["edge_path"], j["edge_chunk"]);
    if (it < 0 || it >= iterations)
      continue;
    entry e{j["epoch"].get<std::int64_t>(), {}};
    if (j.contains("eval_stats_after")) {
      const auto& a = j["eval_stats_after"];
      if (a.contains("loss") && a["loss"].is_number() && a.contains("count") && a["count"].is_number_unsigned()) {
        e.after.count = a["count"].get<std::uint64_t>();
        e.after.loss = a["loss"].get<double>() * static_cast<double>(e.after.count);
      }
    }
    by_iteration[it] = e;
  }
  for (const auto& [it, e] : by_iteration)
    add(e.epoch, e.after);
  return {};
}

} // namespace abg::train
