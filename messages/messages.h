// The atoms of the messages between roles and the CAF `inspect` overloads of
// their payloads (messages/payloads.h; tensors serialize through the Cap'n
// Proto codec). The typed interfaces that use them are in messages/interfaces.h.
#pragma once

#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include <caf/all.hpp>

#include "messages/payloads.h"

namespace abg::eval {

// Summed ranking statistics travel as their sums (exact to merge).
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, metrics& x) {
  return f(caf::meta::type_name("metrics"), x.count, x.ranked, x.rank_sum, x.reciprocal_sum, x.hits1, x.hits3, x.hits10,
           x.hits50, x.auc_sum, x.auc_weight, x.loss_sum, x.loss_count);
}

} // namespace abg::eval

namespace abg::schedule {

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, bucket& x) {
  return f(caf::meta::type_name("bucket"), x.lhs, x.rhs);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, part_key& x) {
  return f(caf::meta::type_name("part_key"), x.side, x.part);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, part_version& x) {
  return f(caf::meta::type_name("part_version"), x.key, x.version);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, grant& x) {
  auto what = static_cast<uint8_t>(x.what);
  if constexpr (std::is_same_v<typename Inspector::result_type, void> || Inspector::reads_state) {
    return f(caf::meta::type_name("grant"), what, x.epoch, x.assigned, x.drop, x.fetch, x.ahead, x.awaited);
  } else {
    return f(caf::meta::type_name("grant"), what, x.epoch, x.assigned, x.drop, x.fetch, x.ahead, x.awaited,
             caf::meta::load_callback([&]() -> caf::error {
               if (what > static_cast<uint8_t>(grant::kind::wait))
                 return caf::make_error(caf::sec::invalid_argument, "bad grant kind");
               x.what = static_cast<grant::kind>(what);
               return caf::none;
             }));
  }
}

} // namespace abg::schedule

namespace abg::storage {

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, dataset_file& x) {
  return f(caf::meta::type_name("dataset_file"), x.root, x.name, x.bytes, x.checksum);
}

} // namespace abg::storage

namespace abg::msg {

// --- atoms (CAF 0.17: at most 10 characters) --------------------------------
// lock server
using subscribe_atom = caf::atom_constant<caf::atom("subscribe")>; // coordinator: send me the events
using start_atom = caf::atom_constant<caf::atom("start")>;         // coordinator: start an epoch
using reset_atom = caf::atom_constant<caf::atom("reset")>;         // coordinator: rollback
using enroll_atom = caf::atom_constant<caf::atom("enroll")>;       // trainer: monitor me
using leave_atom = caf::atom_constant<caf::atom("leave")>;         // coordinator: that trainer is gone
using acquire_atom = caf::atom_constant<caf::atom("acquire")>;     // trainer
using unlock_atom = caf::atom_constant<caf::atom("unlock")>;       // trainer: written back
using release_atom = caf::atom_constant<caf::atom("release")>;     // trainer: bucket trained
using handed_atom = caf::atom_constant<caf::atom("handed")>;       // trainer: what was handed to my reservation
using tick_atom = caf::atom_constant<caf::atom("tick")>;           // a role's own timer
// lock server -> coordinator
using released_atom = caf::atom_constant<caf::atom("released")>;
using requeued_atom = caf::atom_constant<caf::atom("requeued")>;
using epoch_done_atom = caf::atom_constant<caf::atom("epochdone")>;
using failed_atom = caf::atom_constant<caf::atom("failed")>;       // a role -> coordinator
using stalled_atom = caf::atom_constant<caf::atom("stalled")>;     // trainer -> coordinator: lost a peer
// partition and parameter servers
using get_atom = caf::atom_constant<caf::atom("get")>;             // partition get (one chunk)
using put_atom = caf::atom_constant<caf::atom("put")>;             // partition put (one chunk)
using list_atom = caf::atom_constant<caf::atom("list")>;           // stored partitions
using clear_atom = caf::atom_constant<caf::atom("clear")>;         // forget everything (rollback)
using save_atom = caf::atom_constant<caf::atom("save")>;           // checkpoint_mode = local: write a table here
using restore_atom = caf::atom_constant<caf::atom("restore")>;     // checkpoint_mode = local: read one back
using prune_atom = caf::atom_constant<caf::atom("prune")>;         // checkpoint_mode = local: drop unlisted files
using push_atom = caf::atom_constant<caf::atom("push")>;           // parameter delta push
using pull_atom = caf::atom_constant<caf::atom("pull")>;           // parameter pull
// trainer
using setup_atom = caf::atom_constant<caf::atom("setup")>;         // coordinator: (re)start training
using sync_atom = caf::atom_constant<caf::atom("sync")>;           // coordinator: one parameter exchange
using shared_atom = caf::atom_constant<caf::atom("shared")>;       // coordinator: shared state for a checkpoint
using abort_atom = caf::atom_constant<caf::atom("abort")>;         // drop everything (rollback); a put: its writer left
using job_done_atom = caf::atom_constant<caf::atom("jobdone")>;    // worker thread -> its trainer
// coordinator and nodes
using join_atom = caf::atom_constant<caf::atom("join")>;           // node -> coordinator
using run_atom = caf::atom_constant<caf::atom("run")>;             // coordinator's node: train, answer when done
using stop_atom = caf::atom_constant<caf::atom("stop")>;           // stop cleanly, keep the last commit
using peers_atom = caf::atom_constant<caf::atom("peers")>;         // coordinator -> node: connect to these
using finish_atom = caf::atom_constant<caf::atom("finish")>;       // coordinator -> node: exit with this code
using status_atom = caf::atom_constant<caf::atom("status")>;       // any role: a snapshot
using data_atom = caf::atom_constant<caf::atom("data")>;           // node -> coordinator: where is the data
using read_atom = caf::atom_constant<caf::atom("read")>;           // node -> data server: bytes of a file
using probe_atom = caf::atom_constant<caf::atom("probe")>;         // coordinator -> node: can you connect to these
using inspect_atom = caf::atom_constant<caf::atom("inspect")>;     // console -> inspector -> coordinator: a view
using pause_atom = caf::atom_constant<caf::atom("pause")>;         // coordinator -> lock server: hand out nothing
using challenge_atom = caf::atom_constant<caf::atom("challenge")>; // admin console -> inspector: a fresh nonce
using admin_atom = caf::atom_constant<caf::atom("admin")>;         // admin console -> inspector -> coordinator
using linger_atom = caf::atom_constant<caf::atom("linger")>;       // node -> inspector: answer once consoles heard
using log_atom = caf::atom_constant<caf::atom("log")>;             // node -> coordinator: a line for the run's log

// --- inspect overloads ------------------------------------------------------
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, tensor& x) {
  if constexpr (std::is_same_v<typename Inspector::result_type, void>) {
    return f(caf::meta::type_name("tensor"), x.shape); // to_string: shape only
  } else if constexpr (Inspector::reads_state) {
    auto frames = encode_tensor(x);
    if (!frames)
      return caf::make_error(caf::sec::invalid_argument, frames.error());
    return f(caf::meta::type_name("tensor"), *frames);
  } else {
    // The frames as the line above writes them (a sequence of byte
    // sequences), read one at a time into the assembler: CAF's own loading of
    // a byte vector would first allocate whatever 32-bit size it claims.
    std::size_t count = 0;
    if (auto err = f.begin_sequence(count))
      return err;
    tensor_assembler assembler;
    frame buffer;
    for (std::size_t i = 0; i < count; ++i) {
      std::size_t bytes = 0;
      if (auto err = f.begin_sequence(bytes))
        return err;
      if (bytes > kMaxFrameBytes)
        return caf::make_error(caf::sec::invalid_argument, "tensor frame claims " + std::to_string(bytes) +
                                                               " bytes, more than a frame holds (" +
                                                               std::to_string(kMaxFrameBytes) + ")");
      buffer.resize(bytes);
      if (bytes > 0)
        if (auto err = f.apply_raw(bytes, buffer.data()))
          return err;
      if (auto err = f.end_sequence())
        return err;
      if (auto added = assembler.add(buffer); !added)
        return caf::make_error(caf::sec::invalid_argument, added.error());
    }
    if (auto err = f.end_sequence())
      return err;
    if (!assembler.complete())
      return caf::make_error(caf::sec::invalid_argument, "tensor frames: missing chunks");
    x = assembler.take();
    return caf::none;
  }
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, bucket_stats& x) {
  return f(caf::meta::type_name("bucket_stats"), x.trainer, x.epoch, x.trained, x.edges, x.chunk_edges, x.loss,
           x.seconds, x.fetch_seconds, x.eval_before, x.eval_after, x.lock_wait_seconds, x.fetched,
           x.read_ahead);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, partition_key& x) {
  return f(caf::meta::type_name("partition_key"), x.entity, x.part);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, partition_chunk& x) {
  return f(caf::meta::type_name("partition_chunk"), x.key, x.version, x.base_version, x.row_offset, x.total_rows,
           x.embeddings, x.optim_state);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, partition_info& x) {
  return f(caf::meta::type_name("partition_info"), x.key, x.version, x.rows, x.dim, x.state_width);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, named_tensor& x) {
  return f(caf::meta::type_name("named_tensor"), x.name, x.value);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, trainer_status& x) {
  return f(caf::meta::type_name("trainer_status"), x.trainer, x.busy, x.current, x.buckets_trained, x.held,
           x.parameter_bytes, x.busy_seconds);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, param_status& x) {
  return f(caf::meta::type_name("param_status"), x.names, x.bytes, x.pushes, x.pulls, x.pushed_bytes, x.pulled_bytes,
           x.seconds);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, role_flow& x) {
  return f(caf::meta::type_name("role_flow"), x.peer, x.outgoing, x.role, x.remote, x.messages, x.bytes);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, actor_role& x) {
  return f(caf::meta::type_name("actor_role"), x.actor, x.role);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, node_status& x) {
  return f(caf::meta::type_name("node_status"), x.rss_bytes, x.sent, x.received, x.implied_swaps, x.peers, x.peer_sent,
           x.peer_received, x.messages_sent, x.messages_received, x.peer_messages_sent, x.peer_messages_received,
           x.flows, x.actors, x.local_ends);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, log_line& x) {
  return f(caf::meta::type_name("log_line"), x.node, x.micros, x.text);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, table_file& x) {
  return f(caf::meta::type_name("table_file"), x.name, x.bytes, x.checksum, x.linked);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, data_listing& x) {
  return f(caf::meta::type_name("data_listing"), x.dataset, x.config_digest, x.abg_version, x.files);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, run_summary& x) {
  return f(caf::meta::type_name("run_summary"), x.seed, x.iterations_run, x.first_iteration, x.edges, x.seconds,
           x.checkpoint_version, x.stopped, x.stopped_by_console, x.early_stopped_epoch, x.rollbacks, x.buckets_per_trainer);
}

} // namespace abg::msg
