// Typed interfaces of the roles (docs/actors.md) and the payloads that carry
// actor handles. Every payload is registered (register_message_types), so
// each interface works across processes unchanged.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <caf/all.hpp>

#include "messages/messages.h"

namespace abg::msg {

/// checkpoint_mode = "local" (docs/cluster.md, "Checkpoints"): a table that a
/// partition server writes into its own node's checkpoint path, as the files
/// that checkpoint version `commit` names for it.
struct table_save {
  partition_key key;
  uint64_t version = 0; // the partition server version expected
  int64_t commit = 0;   // the checkpoint version being written
  // A replica: the partition server (a partition_server_actor) to copy the
  // table from, and its bulk channel (empty: in this process). None: the
  // server's own copy. At most one; a list because a null handle does not
  // cross CAF's serializer without a proxy registry (the in-process wire).
  std::vector<caf::actor> source;
  std::string source_bulk;
};

/// A table read back from a partition server's own checkpoint path (its
/// embeddings and optimizer files, with their manifest checksums) and stored
/// as `version` into `target` (a partition_server_actor; bulk as above).
struct table_restore {
  partition_key key;
  uint64_t version = 0;
  std::vector<table_file> files;
  std::vector<caf::actor> target; // at most one; none: the server asked restores into itself
  std::string target_bulk;
};

/// Partition server: partitions not in use, with their optimizer state and version.
using partition_server_actor = caf::typed_actor<
  // (key, least version, first row, max rows) -> that chunk; an error for an
  // unknown key, a bad range or a stored version older than asked.
  caf::replies_to<get_atom, partition_key, uint64_t, uint64_t, uint64_t>::with<partition_chunk>,
  // Chunks in row order; the partition is replaced only when its last chunk
  // arrives (true), so a writer that dies midway changes nothing; refused when
  // base_version is not the stored version.
  caf::replies_to<put_atom, partition_chunk>::with<bool>,
  // (key, version): the writer of that put went away after some chunks (its
  // bulk connection closed); drops the put, and on disk its files, now
  // instead of at the key's next put. True when such a put was pending.
  caf::replies_to<abort_atom, partition_key, uint64_t>::with<bool>,
  caf::replies_to<list_atom>::with<std::vector<partition_info>>,
  // Forgets every partition (a rollback seeds them again).
  caf::replies_to<clear_atom>::with<bool>,
  // checkpoint_mode = "local": writes the table into this node's checkpoint
  // path, synced -> its files (embeddings, optimizer). Refused when the
  // stored (for a replica: the fetched) version is not the one expected.
  caf::replies_to<save_atom, table_save>::with<std::vector<table_file>>,
  // Reads a table back from this node's checkpoint path, checks its
  // checksums and stores it into the target.
  caf::replies_to<restore_atom, table_restore>::with<bool>,
  // Removes the table files of this node's checkpoint path that none of
  // these ("tables/NAME": what the committed versions list) names.
  caf::replies_to<prune_atom, std::vector<std::string>>::with<bool>,
  // From its own worker thread (file IO): that job is done.
  caf::reacts_to<job_done_atom, uint64_t>>;

/// Parameter-server shard: shared parameters by name.
using parameter_server_actor = caf::typed_actor<
  // Adds the delta (the first push of a name sets it) and returns the sum.
  caf::replies_to<push_atom, std::string, tensor>::with<tensor>,
  caf::replies_to<pull_atom, std::string>::with<tensor>,
  caf::replies_to<clear_atom>::with<bool>,
  // Its counters (the console's `params`).
  caf::replies_to<status_atom>::with<param_status>>;

/// What the coordinator is told as it happens (by the lock server and the trainers).
using events_actor = caf::typed_actor<
  caf::reacts_to<released_atom, bucket_stats>,
  // A trainer was lost: these buckets are pending again.
  caf::reacts_to<requeued_atom, uint32_t, std::vector<bucket>>,
  // Every bucket of the epoch released and every partition written back.
  caf::reacts_to<epoch_done_atom, int32_t>,
  // A role failed for a reason other than losing a peer (a corrupt bucket
  // file, a kernel error): the run stops with this message.
  caf::reacts_to<failed_atom, std::string>,
  // A trainer lost a peer mid-job (a server went down or stopped answering):
  // it dropped what it held and waits to be set up again.
  caf::reacts_to<stalled_atom, uint32_t, std::string>>;

/// Lock server: one per cluster.
using lock_server_actor = caf::typed_actor<
  caf::replies_to<subscribe_atom, events_actor>::with<bool>,
  // Starts an epoch, these buckets already trained (before a commit made
  // mid-epoch). False while partitions of the last one are still held or a
  // bucket is off the grid.
  caf::replies_to<start_atom, int32_t, std::vector<bucket>>::with<bool>,
  // Paused (true): no bucket is handed out, trainers write back what they
  // hold; answered once no bucket is trained and no partition held (at
  // once if so), or false when resumed before that. Resumed (false):
  // answered at once. Kept across reset.
  caf::replies_to<pause_atom, bool>::with<bool>,
  // Rollback: forget every lock and bucket; every partition is at this version.
  caf::replies_to<reset_atom, uint64_t>::with<bool>,
  // A trainer (id, its actor): monitored; when it goes down its locks are
  // freed and its buckets re-queued. Enrolling an id again replaces the old actor.
  caf::replies_to<enroll_atom, uint32_t, caf::actor_addr>::with<bool>,
  // The coordinator declared this trainer lost (same as its going down).
  caf::replies_to<leave_atom, uint32_t>::with<bool>,
  // The next step of a trainer (schedule::grant). A trainer for which nothing
  // is allowed is answered `wait` within a few seconds, never left hanging.
  caf::replies_to<acquire_atom, uint32_t>::with<grant>,
  // (trainer, partitions written back with their new versions).
  caf::replies_to<unlock_atom, uint32_t, std::vector<part_version>>::with<bool>,
  // The partitions its reservation awaited (grant::awaited) handed to the
  // trainer since it last asked, locked for it: read them ahead.
  caf::replies_to<handed_atom, uint32_t>::with<std::vector<part_version>>,
  // Marks stats.trained done. False if that trainer does not train it.
  caf::replies_to<release_atom, bucket_stats>::with<bool>,
  // Its own timer: parked acquires past their time are answered `wait`.
  caf::reacts_to<tick_atom>>;

/// What a trainer needs to train: where the servers are, the run's seeds
/// and the shared parameters to start from (values and optimizer state,
/// checkpoint names). A trainer set up again drops everything it holds.
struct trainer_setup {
  uint32_t trainer = 0;
  uint64_t generation = 0; // bumped by every rollback
  events_actor events;
  lock_server_actor lock;
  std::vector<partition_server_actor> partition_servers;
  std::vector<std::string> partition_bulk; // their bulk channels ("host:port"; empty in one process)
  std::vector<parameter_server_actor> parameter_servers; // empty: one trainer, nothing shared
  uint64_t seed = 0;
  uint64_t held_out_seed = 0;
  std::vector<named_tensor> shared;
};

/// Trainer: one per machine.
using trainer_actor = caf::typed_actor<
  caf::replies_to<setup_atom, trainer_setup>::with<bool>,
  // One exchange with the parameter servers (between epochs, trainers idle).
  caf::replies_to<sync_atom>::with<bool>,
  // Shared parameters, their optimizer state and the unpartitioned tables
  // this trainer holds, except the names given (a checkpoint's share).
  caf::replies_to<shared_atom, std::vector<std::string>>::with<std::vector<named_tensor>>,
  // Stops the current bucket and drops everything unsaved; idle until set up again.
  caf::replies_to<abort_atom>::with<bool>,
  // Answered at once, also while the kernel runs.
  caf::replies_to<status_atom>::with<trainer_status>,
  // From its own worker thread: that job is done.
  caf::reacts_to<job_done_atom, uint64_t>>;

/// A node: one process hosting some roles (or one simulated machine).
using node_actor = caf::typed_actor<
  // Connect to these nodes ("host:port") directly, so that traffic between
  // them does not go through the coordinator's node; answered once connected.
  caf::replies_to<peers_atom, std::vector<std::string>>::with<bool>,
  // The check (`--check`): open and close a TCP connection to each of these
  // ("host:port": the other nodes' bulk channels); an error names the first that fails.
  caf::replies_to<probe_atom, std::vector<std::string>>::with<bool>,
  // The run is over for this node: exit with this code, say why. Answered,
  // so that the coordinator's node does not exit with the message unsent.
  caf::replies_to<finish_atom, int32_t, std::string>::with<bool>,
  // Its memory and traffic (answered at once; the coordinator's heartbeat),
  // told every node's long-lived actor ids (actors/role_traffic.h).
  caf::replies_to<status_atom, std::vector<uint64_t>>::with<node_status>>;

/// The coordinator's node's copy of the imported data, for nodes that join
/// without it or with another (docs/cluster.md, "Data at join").
using data_server_actor = caf::typed_actor<
  // Every file with its size and checksum (read and checksummed once).
  caf::replies_to<list_atom>::with<data_listing>,
  // (file index in the listing, offset) -> the next data_chunk_bytes of it (fewer at its end).
  caf::replies_to<read_atom, uint32_t, uint64_t>::with<std::vector<char>>>;

/// A node as it joins: its name, address and roles (a handle is invalid for
/// a role the node does not host), and what the coordinator checks.
struct member {
  std::string name;
  std::string host;
  uint16_t port = 0;
  node_actor node;
  trainer_actor trainer;
  partition_server_actor partition_server;
  std::string partition_bulk; // its bulk channel ("host:port"), on a node of a multi-process cluster
  parameter_server_actor parameter_server;
  lock_server_actor lock_server;
  std::string dataset;       // the node's entity path's dataset id (hex)
  std::string config_digest; // of the node's effective training config
  std::string abg_version;
  // Started for the pre-flight check (`--check`): nothing is trained. Not a
  // bool: GCC 12 at -O3 misreads CAF 0.17's bool serializer (-Warray-bounds).
  uint8_t check_only = 0;
  uint64_t mem_available = 0; // bytes its machine has free (MemAvailable), for the check
};

/// Coordinator: one per cluster (rank 0). Also the lock server's event sink.
using coordinator_actor = events_actor::extend<
  // Where a node gets the coordinator's copy of the data, before it joins.
  caf::replies_to<data_atom>::with<data_server_actor>,
  // A node joins: refused (an error naming why) when it does not belong.
  caf::replies_to<join_atom, member>::with<bool>,
  // Train; answered when the run ends.
  caf::replies_to<run_atom>::with<run_summary>,
  // Stop cleanly: no commit of the interrupted iteration.
  caf::replies_to<stop_atom>::with<bool>,
  // Its own timers (the join deadline, the wait for a lost server, restarts).
  caf::reacts_to<tick_atom, uint64_t>,
  // From its own job thread (seeding servers, committing checkpoints).
  caf::reacts_to<job_done_atom, uint64_t>,
  // A view of the run as one JSON document (docs/console.md): one of
  // msg::views (messages/views.h); another name is an error listing them.
  caf::replies_to<inspect_atom, std::string>::with<std::string>,
  // A line of a node's log, for the run's log beside the checkpoint
  // (actors/run_log.h); a name that is not one of the cluster's nodes is dropped.
  caf::reacts_to<log_atom, log_line>,
  // An admin console's command, checked by the inspector (docs/console.md,
  // "Steering a run"): "pause", "resume", "checkpoint" or "stop" -> what was
  // done. Taken from actors of the coordinator's own process only.
  caf::replies_to<admin_atom, std::string>::with<std::string>>;

/// The inspector: what `abg console` may ask of a run, published on a port
/// of its own by the coordinator's node behind the node's gate. Views for
/// anyone who passed the gate; commands only with a proof of the admin token
/// (messages/admin_proof.h): a nonce first, then (command, nonce, proof).
/// `linger` is the exiting node's: answered once every console that sent
/// stop has detached (asking it changes nothing).
using inspector_actor = caf::typed_actor<caf::replies_to<inspect_atom, std::string>::with<std::string>,
                                         caf::replies_to<challenge_atom>::with<std::string>,
                                         caf::replies_to<admin_atom, std::string, std::string, std::string>::with<std::string>,
                                         caf::replies_to<linger_atom>::with<bool>>;

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, table_save& x) {
  return f(caf::meta::type_name("table_save"), x.key, x.version, x.commit, x.source, x.source_bulk);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, table_restore& x) {
  return f(caf::meta::type_name("table_restore"), x.key, x.version, x.files, x.target, x.target_bulk);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, trainer_setup& x) {
  return f(caf::meta::type_name("trainer_setup"), x.trainer, x.generation, x.events, x.lock, x.partition_servers,
           x.partition_bulk, x.parameter_servers, x.seed, x.held_out_seed, x.shared);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, member& x) {
  return f(caf::meta::type_name("member"), x.name, x.host, x.port, x.node, x.trainer, x.partition_server,
           x.partition_bulk, x.parameter_server, x.lock_server, x.dataset, x.config_digest, x.abg_version,
           x.check_only, x.mem_available);
}

/// Announces every message type to CAF (call before creating the actor system).
void register_message_types(caf::actor_system_config& cfg);

} // namespace abg::msg
