#include "abg/eval/metrics.h"

#include <cmath>
#include <limits>

#include <fmt/format.h>

namespace abg::eval {
namespace {
constexpr double nan = std::numeric_limits<double>::quiet_NaN();

double ratio(double sum, double n) { return n > 0 ? sum / n : nan; }

nlohmann::json number_or_null(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); }
} // namespace

void metrics::add_rank(std::int64_t rank) {
  ++ranked;
  rank_sum += static_cast<double>(rank);
  reciprocal_sum += 1.0 / static_cast<double>(rank);
  hits1 += rank <= 1;
  hits3 += rank <= 3;
  hits10 += rank <= 10;
  hits50 += rank <= 50;
}

void metrics::add_auc(double value, double weight) {
  if (std::isnan(value) || !(weight > 0))
    return;
  auc_sum += value * weight;
  auc_weight += weight;
}

void metrics::add_loss(double sum, std::uint64_t edges) {
  loss_sum += sum;
  loss_count += edges;
}

void metrics::merge(const metrics& o) {
  count += o.count;
  ranked += o.ranked;
  rank_sum += o.rank_sum;
  reciprocal_sum += o.reciprocal_sum;
  hits1 += o.hits1;
  hits3 += o.hits3;
  hits10 += o.hits10;
  hits50 += o.hits50;
  auc_sum += o.auc_sum;
  auc_weight += o.auc_weight;
  loss_sum += o.loss_sum;
  loss_count += o.loss_count;
}

double metrics::mrr() const { return ratio(reciprocal_sum, static_cast<double>(ranked)); }
double metrics::mean_rank() const { return ratio(rank_sum, static_cast<double>(ranked)); }
double metrics::hits_at_1() const { return ratio(static_cast<double>(hits1), static_cast<double>(ranked)); }
double metrics::hits_at_3() const { return ratio(static_cast<double>(hits3), static_cast<double>(ranked)); }
double metrics::hits_at_10() const { return ratio(static_cast<double>(hits10), static_cast<double>(ranked)); }
double metrics::hits_at_50() const { return ratio(static_cast<double>(hits50), static_cast<double>(ranked)); }
double metrics::auc() const { return ratio(auc_sum, auc_weight); }
double metrics::loss() const { return ratio(loss_sum, static_cast<double>(loss_count)); }

nlohmann::json metrics::to_json() const {
  nlohmann::json j = nlohmann::json::object();
  if (loss_count > 0)
    j["loss"] = number_or_null(loss());
  j["mrr"] = number_or_null(mrr());
  j["mean_rank"] = number_or_null(mean_rank());
  j["hits@1"] = number_or_null(hits_at_1());
  j["hits@3"] = number_or_null(hits_at_3());
  j["hits@10"] = number_or_null(hits_at_10());
  j["hits@50"] = number_or_null(hits_at_50());
  j["auc"] = number_or_null(auc());
  j["count"] = count;
  return j;
}

std::string metrics::to_string() const {
  return fmt::format("{}mrr: {:.6g} , mean_rank: {:.6g} , hits@1: {:.6g} , hits@3: {:.6g} , hits@10: {:.6g} , "
                     "hits@50: {:.6g} , auc: {:.6g} , count: {}",
                     loss_count > 0 ? fmt::format("loss: {:.6g} , ", loss()) : std::string{}, mrr(), mean_rank(),
                     hits_at_1(), hits_at_3(), hits_at_10(), hits_at_50(), auc(), count);
}

void eval_stats::add_rank(std::int64_t relation, std::int64_t rank) {
  overall.add_rank(rank);
  per_relation[relation].add_rank(rank);
}

void eval_stats::add_auc(std::int64_t relation, double value, double weight) {
  overall.add_auc(value, weight);
  per_relation[relation].add_auc(value, weight);
}

void eval_stats::add_edges(std::int64_t relation, std::uint64_t edges) {
  overall.add_edges(edges);
  per_relation[relation].add_edges(edges);
}

void eval_stats::add_loss(std::int64_t relation, double sum, std::uint64_t edges) {
  overall.add_loss(sum, edges);
  per_relation[relation].add_loss(sum, edges);
}

void eval_stats::merge(const eval_stats& other) {
  overall.merge(other.overall);
  for (const auto& [rel, m] : other.per_relation)
    per_relation[rel].merge(m);
}

nlohmann::json eval_stats::to_json(bool with_per_relation, const std::vector<std::string>& relation_names) const {
  nlohmann::json j = overall.to_json();
  if (with_per_relation) {
    nlohmann::json per = nlohmann::json::object();
    for (const auto& [rel, m] : per_relation) {
      const bool named = rel >= 0 && static_cast<std::size_t>(rel) < relation_names.size();
      per[named ? relation_names[static_cast<std::size_t>(rel)] : std::to_string(rel)] = m.to_json();
    }
    j["per_relation"] = std::move(per);
  }
  return j;
}

} // namespace abg::eval
