// Every message that crosses machines: atoms, payload types, their CAF
// `inspect` overloads (tensors serialize through the Cap'n Proto codec) and
// their registration with a CAF 0.17 actor system (docs/actors.md).
#pragma once

#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include <caf/all.hpp>

#include "abg/eval/metrics.h"
#include "actors/bucket_scheduler.h"
#include "messages/tensor_codec.h"

namespace abg::eval {

// Summed ranking statistics travel as their sums (exact to merge).
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, metrics& x) {
  return f(caf::meta::type_name("metrics"), x.count, x.ranked, x.rank_sum, x.reciprocal_sum, x.hits1, x.hits10,
           x.hits50, x.auc_sum, x.auc_weight, x.loss_sum, x.loss_count);
}

} // namespace abg::eval

namespace abg::msg {

// --- atoms (CAF 0.17: at most 10 characters) --------------------------------
using start_atom = caf::atom_constant<caf::atom("start")>;         // coordinator -> lock server
using acquire_atom = caf::atom_constant<caf::atom("acquire")>;     // trainer -> lock server
using release_atom = caf::atom_constant<caf::atom("release")>;     // trainer -> lock server
using epoch_done_atom = caf::atom_constant<caf::atom("epochdone")>;  // -> lock server, replies when done
using status_atom = caf::atom_constant<caf::atom("status")>;       // any role: a snapshot
using get_atom = caf::atom_constant<caf::atom("get")>;             // partition get (one chunk)
using put_atom = caf::atom_constant<caf::atom("put")>;             // partition put (one chunk)
using push_atom = caf::atom_constant<caf::atom("push")>;           // parameter delta push
using pull_atom = caf::atom_constant<caf::atom("pull")>;           // parameter pull
using run_atom = caf::atom_constant<caf::atom("run")>;             // coordinator -> trainer: an epoch
using kernel_done_atom = caf::atom_constant<caf::atom("kerneldone")>;  // worker thread -> its trainer
using run_epochs_atom = caf::atom_constant<caf::atom("runepochs")>;  // driver -> coordinator

using abg::actors::acquire_result;
using abg::actors::bucket;

/// What a trainer reports when it releases a bucket.
struct bucket_stats {
  uint32_t trainer = 0;
  int32_t epoch = 0;
  bucket trained{};
  int64_t edges = 0;
  double loss = 0;     // sum over the bucket's edges
  double seconds = 0;  // kernel wall time
  // eval_fraction: the bucket's held-out edges ranked before and after
  // training it (empty when nothing was held out).
  eval::metrics eval_before, eval_after;
};

/// What the lock server reports when an epoch is done.
struct epoch_stats {
  int32_t epoch = 0;
  uint32_t buckets = 0;
  uint32_t requeued = 0;  // buckets given back by dead trainers
  int64_t edges = 0;
  double loss = 0;
  double seconds = 0;  // sum of kernel time
  std::vector<bucket_stats> per_bucket;
};

/// A partition of one entity type.
struct partition_key {
  std::string entity;
  int32_t part = 0;
  auto operator<=>(const partition_key&) const = default;
};

/// Rows [row_offset, row_offset + rows) of a partition: embeddings [rows, dim]
/// and their row-wise Adagrad state [rows]. A partition travels as explicitly
/// requested chunks (flow control by request/response).
struct partition_chunk {
  partition_key key;
  uint64_t row_offset = 0;
  uint64_t total_rows = 0;
  tensor embeddings;
  tensor optim_state;
};

/// Status of a trainer (answered while its kernel runs).
struct trainer_status {
  uint32_t trainer = 0;
  bool busy = false;
  bucket current{};
  uint32_t buckets_trained = 0;
};

// --- inspect overloads ------------------------------------------------------
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, tensor& x) {
  if constexpr (std::is_same_v<typename Inspector::result_type, void>) {
    return f(caf::meta::type_name("tensor"), x.shape);  // to_string: shape only
  } else if constexpr (Inspector::reads_state) {
    auto frames = encode_tensor(x);
    if (!frames) return caf::make_error(caf::sec::invalid_argument, frames.error());
    return f(caf::meta::type_name("tensor"), *frames);
  } else {
    std::vector<frame> frames;
    return f(caf::meta::type_name("tensor"), frames, caf::meta::load_callback([&]() -> caf::error {
               auto t = decode_tensor(frames);
               if (!t) return caf::make_error(caf::sec::invalid_argument, t.error());
               x = std::move(*t);
               return caf::none;
             }));
  }
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, bucket_stats& x) {
  return f(caf::meta::type_name("bucket_stats"), x.trainer, x.epoch, x.trained, x.edges, x.loss, x.seconds,
           x.eval_before, x.eval_after);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, epoch_stats& x) {
  return f(caf::meta::type_name("epoch_stats"), x.epoch, x.buckets, x.requeued, x.edges, x.loss, x.seconds,
           x.per_bucket);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, partition_key& x) {
  return f(caf::meta::type_name("partition_key"), x.entity, x.part);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, partition_chunk& x) {
  return f(caf::meta::type_name("partition_chunk"), x.key, x.row_offset, x.total_rows, x.embeddings,
           x.optim_state);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, trainer_status& x) {
  return f(caf::meta::type_name("trainer_status"), x.trainer, x.busy, x.current, x.buckets_trained);
}

/// Announces every message type to CAF (call before creating the actor system).
void register_message_types(caf::actor_system_config& cfg);

}  // namespace abg::msg

namespace abg::actors {

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, bucket& x) {
  return f(caf::meta::type_name("bucket"), x.lhs, x.rhs);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, acquire_result& x) {
  auto what = static_cast<uint8_t>(x.what);
  if constexpr (std::is_same_v<typename Inspector::result_type, void>) {
    return f(caf::meta::type_name("acquire_result"), what, x.assigned);
  } else if constexpr (Inspector::reads_state) {
    return f(caf::meta::type_name("acquire_result"), what, x.assigned);
  } else {
    return f(caf::meta::type_name("acquire_result"), what, x.assigned,
             caf::meta::load_callback([&]() -> caf::error {
               if (what > static_cast<uint8_t>(acquire_result::kind::done))
                 return caf::make_error(caf::sec::invalid_argument, "bad acquire_result kind");
               x.what = static_cast<acquire_result::kind>(what);
               return caf::none;
             }));
  }
}

}  // namespace abg::actors
