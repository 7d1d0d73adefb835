// PBG's model in LibTorch: operators, comparators, losses, negative sampling,
// regularisation and the Adagrad optimisers. No actors, no files, no messages.
// The description (model_desc, kinds, names) is torch-free: abg/model/desc.h.
// Formulas and shapes: docs/model.md.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include <torch/torch.h>

#include "abg/config.h"
#include "abg/error.h"
#include "abg/model/desc.h"
#include "abg/storage/checkpoint.h"

namespace abg::model {

/// Shared parameters keyed by their checkpoint names. Relation parameters of
/// all relation ids with the same (side, param) are rows of one stacked tensor
/// [R, ...] (`stacks`); `values["relations.{r}.{side}.{param}"]` is a view of
/// row r of it, so writing through either is the same. Without dynamic
/// relations each relation id has its own stack of one row.
struct shared_params {
  std::map<std::string, torch::Tensor> values;  // checkpoint name -> float tensor
  std::map<std::string, torch::Tensor> adagrad; // same keys, element-wise Adagrad state
  /// key "{group}.{side}.{param}" (group = relation id, or "dyn" with dynamic relations)
  std::map<std::string, torch::Tensor> stacks;
  std::map<std::string, torch::Tensor> stack_adagrad;

  /// Initial parameters: global embeddings 0, operators at identity.
  static shared_params init(const model_desc& m);

  /// Name of the stacked tensor holding relation r's `param` on side s, and
  /// the row of r in it.
  static std::string stack_key(const model_desc& m, std::int64_t r, side s, std::string_view param);
  static std::int64_t stack_row(const model_desc& m, std::int64_t r) { return m.dynamic ? r : 0; }
  /// values/adagrad names that are views: name -> (stack key, row)
  std::map<std::string, std::pair<std::string, std::int64_t>> views;

  /// Values and Adagrad state ("optim.{name}") for the checkpoint writer.
  storage::shared_tensors to_checkpoint() const;
  /// Copies every known name found in `t` (and its "optim." state when
  /// present); fails on a shape mismatch or a missing parameter. With
  /// `fresh_new_relations` (init_path, dynamic relations), relation ids past
  /// the last one `t` has parameters for keep their initial values: an import
  /// after that checkpoint added them. Returns how many relation ids did.
  expected<std::int64_t> load(const storage::shared_tensors& t, bool fresh_new_relations = false);
  /// A deep copy (for tests and rollback).
  shared_params clone() const;
};

/// A partition's table: embeddings [count, dim] and the entity optimizer's
/// state, [count] for row-wise Adagrad or [count, dim] for element-wise
/// (model_desc::state_width).
struct table {
  torch::Tensor embeddings;
  torch::Tensor state;
  std::int64_t count() const { return embeddings.size(0); }
  /// Optimizer state values per row: 1 (row-wise) or dim (element-wise).
  std::int64_t state_width() const { return state.dim() == 2 ? state.size(1) : 1; }
};

/// Fresh table: N(0,1)·init_scale, state 0 (`state_width` values per row).
table init_table(std::int64_t count, std::int64_t dim, double init_scale, std::uint64_t seed,
                 std::int64_t state_width = 1);

/// An uninitialised table whose embeddings live in memory advised for
/// transparent huge pages: the kernel reads rows at random from tables far
/// larger than the TLB covers with 4 KiB pages (runtime/model/table_memory.cpp).
table allocate_table(std::int64_t count, std::int64_t dim, std::int64_t state_width = 1);

/// One batch of edges as int64 tensors [B] (rel: relation ids) and optional float weights [B].
struct edge_batch {
  torch::Tensor lhs, rhs, rel;
  torch::Tensor weight; // undefined: all 1
  std::int64_t size() const { return lhs.size(0); }
};

// --- the building blocks (differentiable; any floating dtype) ---------------------

/// Applies operator `k` to x [..., d] with parameters `p` (PBG names), each
/// [1, ...] (broadcast) or [B, ...] matching x's leading dimension.
torch::Tensor apply_operator(op_kind k, const torch::Tensor& x, const std::map<std::string, torch::Tensor>& p);
/// cos: x/‖x‖ (norm clamped at 1e-12), others: x. With bias coordinate 0 is kept.
torch::Tensor prepare(comparator_kind c, bool bias, const torch::Tensor& x);
/// Scores of prepared a [..., d] against prepared b [..., d] row by row -> [...].
torch::Tensor score_pairs(comparator_kind c, bool bias, const torch::Tensor& a, const torch::Tensor& b);
/// Scores of prepared anchors a [C, S, d] against prepared candidates n [C, N, d]
/// (or [N, d], shared by all chunks) -> [C, S, N], one batched matrix product.
torch::Tensor score_all(comparator_kind c, bool bias, const torch::Tensor& a, const torch::Tensor& n);
/// Loss of positive scores [B] against negative scores [B, N] with weights [B]
/// (undefined: 1): ranking Σ w·max(0, margin − s + t); logistic
/// Σ w·BCE(s,1) + (1/N)·Σ w·BCE(t,0); softmax Σ w·CE([s,t…],0).
/// KvsAll (`known` [B, N] defined: 1 where a negative column is another known
/// answer of the row's query, k = 1 + its row sum): the answers are targets
/// beside the positive and the row weighs w/k: softmax (LibKGE's KL to the
/// answers' uniform distribution) Σ (w/k)·(lse(s, t…) − (s + Σ_known t)/k);
/// logistic Σ (w/k)·(BCE(s,1) + Σ_known BCE(t,1) + (1/N)·Σ_others BCE(t,0)).
/// Not with ranking.
torch::Tensor loss(loss_kind k, double margin, const torch::Tensor& pos, const torch::Tensor& neg,
                   const torch::Tensor& weight, const torch::Tensor& known = {});

/// Masked score (excluded from every loss and rank).
inline constexpr double masked_score = -1e9;

// --- batch forward ---------------------------------------------------------------

/// Negatives drawn for one batch on one side.
struct side_negatives {
  bool enabled = false;
  bool all = false;        // every entity of the partition (all_negs)
  bool batch_negs = true;  // the chunk's own positives are negatives (num_batch_negs > 0)
  std::int64_t chunk = 1;  // S: edges per chunk
  torch::Tensor uniform;   // int64 [C, U] partition offsets drawn per chunk
};

/// Draws the negatives of a batch of `b` edges for side `s`: chunks of
/// num_batch_negs (`chunk` overrides), U = num_uniform_negs uniform offsets in
/// [0, count) per chunk, or all_negs.
side_negatives draw_negatives(const model_desc& m, side s, std::int64_t b, std::int64_t count, bool all_negs,
                              std::mt19937_64& rng, std::optional<std::int64_t> chunk = std::nullopt,
                              std::optional<std::int64_t> num_uniform = std::nullopt);

/// Scores of one side of a batch: pos [B]; neg [B, N] where for sampled
/// negatives N = chunk + U (the chunk's own candidates first, true pair and
/// padding masked with masked_score) and for all_negs N = count (true entity masked).
struct side_scores {
  torch::Tensor pos, neg;
  torch::Tensor known; // KvsAll: [B, N], 1 at the query's other known answers (see loss)
};

/// The rows a forward pass reads: embeddings of lhs and rhs entities and of
/// the negatives, already gathered (and differentiable if the caller wants).
/// lhs_rows/rhs_rows [B, d]; neg_rows[s]: [C, U, d] uniform rows or, for
/// all_negs, the whole table [count, d].
struct forward_inputs {
  torch::Tensor lhs_rows, rhs_rows;
  torch::Tensor lhs_neg_rows, rhs_neg_rows; // undefined when that side is disabled
  torch::Tensor lhs_global, rhs_global;     // [d] or undefined (no global embedding)
  /// operator parameters per side: PBG names -> [1, ...] or [B, ...]
  std::map<std::string, torch::Tensor> lhs_op, rhs_op;
  op_kind lhs_kind = op_kind::none, rhs_kind = op_kind::none; // lhs only with dynamic relations
  bool per_edge_params = false; // params are [B, ...] (dynamic relations)
  /// Dropout of the 1-vs-all training (elements 0 or 1/(1 − p)), undefined
  /// without: the queries of the lhs and rhs loss sides [B, d], and those
  /// sides' candidates [count, d] (the true entity's row on its positive).
  torch::Tensor lhs_query_mask, rhs_query_mask, lhs_candidate_mask, rhs_candidate_mask;
  /// Dropout of the query's two factors apart (dynamic relations): the
  /// entity rows [B, d] the lhs and rhs loss sides' queries start from, and
  /// masks of the operator parameters those queries carry (the lhs side's
  /// on rhs_op, the rhs side's on lhs_op; name -> [B, ...]).
  torch::Tensor lhs_query_entity_mask, rhs_query_entity_mask;
  std::map<std::string, torch::Tensor> lhs_query_op_mask, rhs_query_op_mask;
  /// KvsAll (all_negs): [B, count] of the lhs and rhs loss sides, 1 where an
  /// entity other than the edge's own answers the edge's query; undefined in 1vsAll.
  torch::Tensor lhs_known, rhs_known;
};

struct forward_result {
  std::optional<side_scores> lhs, rhs; // absent when that side's negatives are disabled
  torch::Tensor reg;                   // scalar (0 without regularisation)
};

/// Scores a batch. `lhs_neg`/`rhs_neg` as drawn by draw_negatives (the true
/// offsets `lhs_offsets`/`rhs_offsets` [B] are needed to mask all_negs).
forward_result forward(const model_desc& m, const forward_inputs& in, const side_negatives& lhs_neg,
                       const side_negatives& rhs_neg, const torch::Tensor& lhs_offsets,
                       const torch::Tensor& rhs_offsets);

/// Total batch loss: relation weight × (lhs loss + rhs loss) + reg.
torch::Tensor batch_loss(const model_desc& m, const forward_result& f, const torch::Tensor& weight,
                         double relation_weight);

/// Evaluation scoring: raw rows of B edges (lhs [B,d], rhs [B,d], relation ids
/// rel [B]) against raw candidate rows [N, d] for side `s` (candidates replace
/// the lhs or rhs entity). Adds global embeddings, applies the operators as
/// training does. Returns pos [B] and neg [B, N] (nothing masked). No grad.
side_scores score_candidates(const model_desc& m, const shared_params& p, side s, const torch::Tensor& lhs_rows,
                             const torch::Tensor& rhs_rows, const torch::Tensor& rel, const torch::Tensor& candidates);

/// The operator parameters of relations `rel` [B] (all equal without
/// dynamic relations) on side s: [1, ...] without dynamic relations, [B, ...] with.
std::map<std::string, torch::Tensor> gather_operator(const model_desc& m, const shared_params& p, side s,
                                                     const torch::Tensor& rel);

// --- optimisers -------------------------------------------------------------------

/// Row-wise Adagrad on rows `idx` [K] of (emb [count, d], state [count]) with
/// gradient g [K, d] (one row per distinct index): G += mean(g²), x −= lr·g/(√G + 1e-10).
void rowwise_adagrad(torch::Tensor& emb, torch::Tensor& state, const torch::Tensor& idx, const torch::Tensor& g,
                     double lr);
/// Element-wise Adagrad on `param` (rows `idx` of dim 0 when defined):
/// G += g², x −= lr·g/(√G + 1e-10).
void elementwise_adagrad(torch::Tensor& param, torch::Tensor& state, const torch::Tensor& idx,
                         const torch::Tensor& g, double lr);
/// The entity optimizer of table `t` on its rows `idx` [K] with gradient g
/// [K, d]: row-wise or element-wise Adagrad, by the shape of t.state.
void entity_adagrad(table& t, const torch::Tensor& idx, const torch::Tensor& g, double lr);
/// `state` converted to `width` values per row: row values copied to each
/// coordinate, coordinate values averaged per row (checkpoints of either
/// optimizer load into either). `state` holds rows·w floats, w = 1 or width.
torch::Tensor state_as(const torch::Tensor& state, std::int64_t rows, std::int64_t width);

} // namespace abg::model
