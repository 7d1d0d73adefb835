// Coordinator: the run's epoch loop and the cluster's membership. Waits for
// every node of the cluster to join, seeds the partition and parameter
// servers from the start point, then per iteration (epoch, edge path, edge
// chunk): starts it on the lock server, collects the released buckets,
// lets the trainers exchange their parameters, commits a checkpoint through
// messages, and goes on. A lost trainer costs its buckets (the lock server
// re-queues them); a lost partition or parameter server rolls the cluster
// back to the last commit once it is back; a lost lock server ends the run.
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <set>

#include <deque>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "abg/units.h"
#include "actors/checkpointer.h"
#include "actors/holdings_view.h"
#include "actors/job_thread.h"
#include "actors/run_log.h"
#include "actors/server_seeding.h"
#include "actors/spawn.h"
#include "actors/traffic_view.h"
#include "messages/views.h"
#include "runtime/train/node_memory.h"
#include "runtime/train/early_stopping.h"
#include "runtime/train/start_point.h"

namespace abg::actors {
namespace {

namespace fs = std::filesystem;
using msg::bucket_stats;
using clock_type = std::chrono::steady_clock;

double seconds_since(clock_type::time_point start) {
  return std::chrono::duration<double>(clock_type::now() - start).count();
}

// What a job on the coordinator's job thread hands back.
struct io_result {
  std::string error;
  bool lost_peer = false;  // the error is a server lost meanwhile: roll back, do not fail
  std::vector<std::string> log;
  // prepare
  std::int64_t first_iteration = 0, next_version = 1;
  std::vector<schedule::bucket> buckets_done; // of first_iteration, committed mid-iteration
  storage::shared_tensors shared;
  committed_tables committed;  // prepare: the checkpoint resumed; commit: the version committed
  std::int64_t tables_written = 0, tables_kept = 0; // commit
  std::int64_t tables_linked = 0; // prepare: from the checkpoint into a store; commit: from a store into it
  std::optional<train::early_stopping> stopping;
  std::optional<std::int64_t> early_stopped_epoch; // a resumed run that already stopped early
  bool nothing_to_train = false;
};

enum class phase { joining, checking, preparing, training, finishing, rolling_back, over };

// What an admin console's checkpoint or stop waits for: no bucket handed out
// until every trainer has written back what it holds, then a commit.
enum class drain_goal { none, checkpoint, stop };

struct node_slot {
  std::optional<msg::member> m;
  bool alive = false;
  std::uint64_t setup_generation = 0;  // its trainer was set up for this generation
  // What its node actor last reported (polled every heartbeat interval),
  // when, and its last report before the current iteration began.
  std::optional<msg::node_status> status, at_iteration;
  clock_type::time_point heard{};
};

struct coordinator_state {
  coordinator_state() = default;  // not an aggregate: CAF would construct it from the actor pointer
  static inline const char* name = "abg.coordinator";
  coordinator_setup cs;
  std::vector<node_slot> nodes;
  std::map<caf::actor_addr, std::size_t> watched;  // every role handle of a member -> its node
  phase ph = phase::joining;
  bool prepared_once = false;
  bool stop_requested = false;
  std::optional<caf::typed_response_promise<msg::run_summary>> run_promise;
  std::optional<std::string> early_result;  // the run ended (error text) before `run` arrived
  bool early_ok = false;
  msg::run_summary summary;
  std::vector<std::int64_t> edges_per_trainer; // over the run, as summary.buckets_per_trainer
  // Over the run, per trainer: where its time went and the partitions it loaded.
  struct time_spent {
    double kernel = 0, fetch = 0, lock_wait = 0;
    std::int64_t loaded = 0;
  };
  std::vector<time_spent> spent_per_trainer;
  clock_type::time_point run_start = clock_type::now();
  // Where the run is.
  std::int64_t iteration = 0;
  std::int64_t next_version = 1;
  std::uint64_t generation = 0;
  storage::shared_tensors shared;  // the last committed (or start) shared parameters
  committed_tables committed;      // the last committed (or resumed) tables, by server version
  std::optional<train::early_stopping> stopping;
  // The current iteration.
  std::map<schedule::bucket, bucket_stats> released;
  // Its buckets whose trainer was lost, until trained again.
  std::set<schedule::bucket> requeued;
  // The committed iterations' partition loads (swaps), oldest first, at most max_events.
  std::deque<std::pair<std::int64_t, std::int64_t>> swaps_per_iteration;
  // Its buckets trained before the version it resumed from was committed
  // mid-iteration; resume_done: those of the iteration the next prepare starts.
  std::vector<schedule::bucket> done_before, resume_done;
  // How many of `released` its last mid-iteration commit holds (checkpoint_every_buckets).
  std::size_t released_at_commit = 0;
  // An admin console's (docs/console.md, "Steering a run").
  bool admin_paused = false;
  drain_goal draining = drain_goal::none;
  std::vector<caf::typed_response_promise<std::string>> checkpoint_waiters;
  clock_type::time_point iteration_start;
  std::uint64_t next_timer = 0;
  std::uint64_t waiting_since_generation = ~std::uint64_t{0};  // the rollback whose server wait is timed
  std::map<std::uint64_t, std::function<void()>> timers;  // tick token -> what to do
  // The inspector's events view: what the coordinator logged (seconds since
  // its start, line), the newest last, at most max_events.
  static constexpr std::size_t max_events = 1000;
  std::deque<std::pair<double, std::string>> events;
  // Every node's log lines (docs/console.md, "The run's log").
  std::unique_ptr<run_log> lines;
  // Declared last: its job finishes and joins first.
  std::unique_ptr<job_runner<io_result>> jobs;
};

using coordinator_pointer = msg::coordinator_actor::stateful_pointer<coordinator_state>;

// An event for the inspector only (the run's output says it its own way).
void note(coordinator_pointer self, std::string line) {
  auto& st = self->state;
  st.events.emplace_back(seconds_since(st.run_start), std::move(line));
  if (st.events.size() > st.max_events) st.events.pop_front();
}

void log(coordinator_pointer self, const std::string& line) {
  note(self, line);
  if (self->state.cs.callbacks.log) self->state.cs.callbacks.log(line);
}

const train::plan& plan_of(coordinator_pointer self) { return *self->state.cs.plan; }

// Runs `fn` on the coordinator after `delay`.
void after(coordinator_pointer self, caf::timespan delay, std::function<void()> fn) {
  auto& st = self->state;
  const auto token = ++st.next_timer;
  st.timers.emplace(token, std::move(fn));
  self->delayed_send(self, delay, msg::tick_atom::value, token);
}

// --- who is where ------------------------------------------------------------------

std::vector<std::size_t> nodes_with(coordinator_pointer self, role r) { return self->state.cs.cluster.with(r); }

bool shares_parameters(coordinator_pointer self) { return self->state.cs.cluster.count(role::trainer) > 1; }

std::vector<std::pair<uint32_t, msg::trainer_actor>> live_trainers(coordinator_pointer self) {
  std::vector<std::pair<uint32_t, msg::trainer_actor>> out;
  auto idx = nodes_with(self, role::trainer);
  for (std::size_t k = 0; k < idx.size(); ++k) {
    auto& slot = self->state.nodes[idx[k]];
    if (slot.alive) out.emplace_back(static_cast<uint32_t>(k), slot.m->trainer);
  }
  return out;
}

// The partition servers as node `from` reaches them: by their bulk channels,
// but those on its own node by messages.
std::vector<partition_server_ref> partition_servers(coordinator_pointer self, std::size_t from) {
  std::vector<partition_server_ref> out;
  for (auto i : nodes_with(self, role::partition_server))
    out.push_back({self->state.nodes[i].m->partition_server, i == from ? "" : self->state.nodes[i].m->partition_bulk});
  return out;
}

// The partition servers' nodes, in partition_servers() order: names for a
// manifest and the bulk channels other nodes reach them by.
std::vector<server_node> server_nodes(coordinator_pointer self) {
  std::vector<server_node> out;
  for (auto i : nodes_with(self, role::partition_server))
    out.push_back({self->state.nodes[i].m->name, self->state.nodes[i].m->partition_bulk});
  return out;
}

std::vector<msg::parameter_server_actor> parameter_servers(coordinator_pointer self) {
  std::vector<msg::parameter_server_actor> out;
  if (!shares_parameters(self)) return out;
  for (auto i : nodes_with(self, role::parameter_server)) out.push_back(self->state.nodes[i].m->parameter_server);
  return out;
}

msg::lock_server_actor lock_server(coordinator_pointer self) {
  return self->state.nodes[nodes_with(self, role::lock_server).front()].m->lock_server;
}

// Nodes whose loss the run cannot go on without: servers and the lock.
bool holds_state(const node_spec& n, bool sharing) {
  return n.has(role::partition_server) || n.has(role::lock_server) || n.has(role::coordinator) ||
         (sharing && n.has(role::parameter_server));
}

std::string node_label(coordinator_pointer self, std::size_t i) {
  const auto& n = self->state.cs.cluster.nodes[i];
  std::vector<std::string> roles;
  for (auto r : n.roles) roles.emplace_back(to_string(r));
  return fmt::format("node {} ({})", n.name, fmt::join(roles, ", "));
}

// The nodes not (or no longer) in the cluster: names, or with `labels` their roles too.
std::vector<std::string> missing_nodes(coordinator_pointer self, bool only_state, bool labels = false) {
  std::vector<std::string> out;
  auto& st = self->state;
  for (std::size_t i = 0; i < st.nodes.size(); ++i)
    if (!st.nodes[i].alive && (!only_state || holds_state(st.cs.cluster.nodes[i], shares_parameters(self))))
      out.push_back(labels ? node_label(self, i) : st.cs.cluster.nodes[i].name);
  return out;
}

std::string trainer_node(coordinator_pointer self, uint32_t trainer) {
  auto idx = nodes_with(self, role::trainer);
  return trainer < idx.size() ? self->state.cs.cluster.nodes[idx[trainer]].name : fmt::format("trainer {}", trainer);
}

// --- inspection (docs/console.md) ---------------------------------------------------------

std::string_view phase_name(phase p) {
  switch (p) {
  case phase::joining: return "joining";
  case phase::checking: return "checking";
  case phase::preparing: return "preparing";
  case phase::training: return "training";
  case phase::finishing: return "finishing";
  case phase::rolling_back: return "rolling back";
  case phase::over: return "over";
  }
  return "?";
}

// What every view starts with: where the run is.
nlohmann::json run_header(coordinator_pointer self, std::string_view view) {
  auto& st = self->state;
  const auto& p = plan_of(self);
  const auto pos = p.position(std::min(st.iteration, std::max<std::int64_t>(p.iterations - 1, 0)));
  return {{"view", view},
          {"phase", phase_name(st.ph)},
          {"iteration", st.iteration},
          {"iterations", p.iterations},
          {"epoch", pos.epoch},
          {"edge_path", pos.edge_path},
          {"edge_chunk", pos.edge_chunk},
          {"seconds", seconds_since(st.run_start)}};
}

nlohmann::json nodes_view(coordinator_pointer self) {
  auto& st = self->state;
  auto doc = run_header(self, "nodes");
  auto& rows = doc["nodes"] = nlohmann::json::array();
  for (std::size_t i = 0; i < st.nodes.size(); ++i) {
    const auto& spec = st.cs.cluster.nodes[i];
    const auto& slot = st.nodes[i];
    std::vector<std::string> roles;
    for (auto r : spec.roles) roles.emplace_back(to_string(r));
    nlohmann::json row{{"name", spec.name},
                       {"roles", roles},
                       {"state", slot.alive ? "alive" : slot.m ? "lost" : "not joined"}};
    if (slot.m) {
      row["host"] = slot.m->host;
      row["port"] = slot.m->port;
      row["abg_version"] = slot.m->abg_version;
      row["mem_available"] = slot.m->mem_available;
    }
    if (slot.status) {
      row["heard_seconds_ago"] = seconds_since(slot.heard);
      row["rss_bytes"] = slot.status->rss_bytes;
    }
    rows.push_back(std::move(row));
  }
  return doc;
}

// Asks every live node for its status (memory, traffic), then runs `done`
// (also for nodes that did not answer within a second: silent, their
// `heard` ages, and CAF's heartbeats declare them lost).
void ask_nodes(coordinator_pointer self, std::function<void()> done) {
  auto& st = self->state;
  std::vector<std::size_t> asked;
  for (std::size_t i = 0; i < st.nodes.size(); ++i)
    if (st.nodes[i].alive && st.nodes[i].m && st.nodes[i].m->node) asked.push_back(i);
  if (asked.empty()) return done();
  auto pending = std::make_shared<std::size_t>(asked.size());
  auto one = [pending, done] {
    if (--*pending == 0) done();
  };
  // Every node's role actors, as they last reported them (actors/role_traffic.h);
  // none until every node asked has reported once: a list without a node's
  // actors would have messages to them counted by neither end.
  std::vector<uint64_t> long_lived;
  if (std::all_of(asked.begin(), asked.end(), [&](std::size_t i) { return st.nodes[i].status.has_value(); }))
    for (const auto& n : st.nodes)
      if (n.status)
        for (const auto& a : n.status->actors) long_lived.push_back(a.actor);
  for (auto i : asked)
    self->request(st.nodes[i].m->node, std::chrono::seconds(1), msg::status_atom::value, long_lived)
      .then(
        [self, i, one](msg::node_status& s) {
          auto& n = self->state.nodes[i];
          n.status = std::move(s);
          n.heard = clock_type::now();
          one();
        },
        [one](caf::error&) { one(); });
}

nlohmann::json traffic_view(coordinator_pointer self) {
  auto& st = self->state;
  auto doc = run_header(self, "traffic");
  std::vector<traffic_node> nodes;
  for (std::size_t i = 0; i < st.nodes.size(); ++i) {
    const auto& slot = st.nodes[i];
    traffic_node n{st.cs.cluster.nodes[i].name, {}, slot.status, slot.at_iteration};
    if (slot.m && !slot.m->host.empty()) n.listens.push_back(endpoint(slot.m->host, slot.m->port));
    if (slot.m && !slot.m->partition_bulk.empty()) n.listens.push_back(slot.m->partition_bulk);
    nodes.push_back(std::move(n));
  }
  doc.update(traffic_rows(nodes));
  return doc;
}

nlohmann::json log_view(coordinator_pointer self) {
  auto doc = run_header(self, "log");
  const auto& lines = *self->state.lines;
  doc["file"] = lines.file().string();
  doc["late_lines"] = lines.late();
  auto& rows = doc["lines"] = nlohmann::json::array();
  for (const auto& l : lines.tail(200))
    rows.push_back({{"micros", l.micros}, {"node", l.node}, {"text", l.text}, {"line", run_log::format(l)}});
  return doc;
}

// A line for the run's log from a node of the cluster (the name is checked:
// a line cannot claim a node that is not one).
void on_log_line(coordinator_pointer self, msg::log_line& line) {
  auto& st = self->state;
  const auto& nodes = st.cs.cluster.nodes;
  if (std::none_of(nodes.begin(), nodes.end(), [&](const auto& n) { return n.name == line.node; })) return;
  const bool had_problem = st.lines->problem().has_value();
  st.lines->add(std::move(line));
  if (!had_problem && st.lines->problem() && st.cs.callbacks.log) st.cs.callbacks.log(*st.lines->problem());
}

// Writes the run's log every half second.
void flush_log(coordinator_pointer self) {
  self->state.lines->flush(run_log::now_micros());
  after(self, std::chrono::milliseconds(500), [self] { flush_log(self); });
}

nlohmann::json events_view(coordinator_pointer self) {
  auto doc = run_header(self, "events");
  auto& rows = doc["events"] = nlohmann::json::array();
  for (const auto& [at, text] : self->state.events) rows.push_back({{"seconds", at}, {"text", text}});
  return doc;
}

// The partitions the trainers loaded for the current iteration's released buckets.
std::int64_t iteration_swaps(coordinator_pointer self) {
  std::int64_t n = 0;
  for (const auto& [b, s] : self->state.released) n += s.fetched;
  return n;
}

// A released bucket's figures: its trainer's report.
nlohmann::json released_row(schedule::bucket b, const bucket_stats& s) {
  nlohmann::json row{{"lhs", b.lhs},
                     {"rhs", b.rhs},
                     {"trainer", s.trainer},
                     {"edges", s.edges},
                     {"seconds", s.seconds},
                     {"loss", s.loss},
                     {"loss_per_edge", s.edges > 0 ? s.loss / static_cast<double>(s.edges) : 0.0},
                     {"edges_per_second", s.seconds > 0 ? static_cast<double>(s.edges) / s.seconds : 0.0},
                     {"lock_wait_seconds", s.lock_wait_seconds},
                     {"fetch_seconds", s.fetch_seconds},
                     {"partitions_loaded", s.fetched}};
  if (s.eval_after.count > 0) {
    row["held_out_edges"] = s.eval_after.count;
    row["mrr_before"] = s.eval_before.mrr();
    row["mrr_after"] = s.eval_after.mrr();
  }
  return row;
}

// `statuses[k]`: what live trainer k (of `trainers`) answered, if it did.
nlohmann::json trainers_view(coordinator_pointer self, const std::vector<std::pair<uint32_t, msg::trainer_actor>>& trainers,
                             const std::vector<std::optional<msg::trainer_status>>& statuses) {
  auto& st = self->state;
  auto doc = run_header(self, "trainers");
  auto& rows = doc["trainers"] = nlohmann::json::array();
  const auto all = nodes_with(self, role::trainer);
  for (uint32_t id = 0; id < all.size(); ++id) {
    nlohmann::json row{{"trainer", id}, {"node", trainer_node(self, id)}};
    // This iteration's released buckets of this trainer, each and together.
    std::int64_t edges = 0, buckets = 0, loaded = 0;
    double seconds = 0, loss = 0, fetch = 0, lock_wait = 0;
    eval::metrics before, after;
    auto& each = row["released"] = nlohmann::json::array();
    for (const auto& [b, s] : st.released) {
      if (s.trainer != id) continue;
      edges += s.edges, seconds += s.seconds, loss += s.loss, ++buckets;
      fetch += s.fetch_seconds, lock_wait += s.lock_wait_seconds, loaded += s.fetched;
      before.merge(s.eval_before), after.merge(s.eval_after);
      each.push_back(released_row(b, s));
    }
    row["iteration_buckets"] = buckets;
    row["iteration_edges"] = edges;
    row["kernel_seconds"] = seconds;
    row["fetch_seconds"] = fetch;
    row["lock_wait_seconds"] = lock_wait;
    row["partitions_loaded"] = loaded;
    row["edges_per_second"] = seconds > 0 ? static_cast<double>(edges) / seconds : 0.0;
    row["loss_per_edge"] = edges > 0 ? loss / static_cast<double>(edges) : 0.0;
    if (after.count > 0) {
      row["held_out_edges"] = after.count;
      row["mrr_before"] = before.mrr();
      row["mrr_after"] = after.mrr();
    }
    row["buckets_trained"] = id < st.summary.buckets_per_trainer.size() ? st.summary.buckets_per_trainer[id] : 0u;
    row["edges_trained"] = id < st.edges_per_trainer.size() ? st.edges_per_trainer[id] : 0;
    if (id < st.spent_per_trainer.size()) {
      const auto& spent = st.spent_per_trainer[id];
      row["run_kernel_seconds"] = spent.kernel;
      row["run_fetch_seconds"] = spent.fetch;
      row["run_lock_wait_seconds"] = spent.lock_wait;
      row["run_partitions_loaded"] = spent.loaded;
    }
    std::string state = "lost";
    for (std::size_t k = 0; k < trainers.size(); ++k) {
      if (trainers[k].first != id) continue;
      if (!statuses[k]) {
        state = "not answering";
      } else if (statuses[k]->busy) {
        state = "training";
        row["bucket"] = {{"lhs", statuses[k]->current.lhs}, {"rhs", statuses[k]->current.rhs}};
        row["bucket_seconds"] = statuses[k]->busy_seconds;
      } else {
        state = "idle";
      }
    }
    row["state"] = state;
    rows.push_back(std::move(row));
  }
  return doc;
}

nlohmann::json buckets_view(coordinator_pointer self, const std::vector<std::pair<uint32_t, msg::trainer_actor>>& trainers,
                            const std::vector<std::optional<msg::trainer_status>>& statuses) {
  auto& st = self->state;
  const auto& p = plan_of(self);
  auto doc = run_header(self, "buckets");
  std::map<schedule::bucket, std::pair<uint32_t, double>> training;  // by whom, for how long
  for (std::size_t k = 0; k < trainers.size(); ++k)
    if (statuses[k] && statuses[k]->busy && !st.released.count(statuses[k]->current))
      training[statuses[k]->current] = {trainers[k].first, statuses[k]->busy_seconds};
  const double now = seconds_since(st.run_start);
  doc["nparts_lhs"] = p.nparts_lhs;
  doc["nparts_rhs"] = p.nparts_rhs;
  doc["total"] = static_cast<std::int64_t>(p.nparts_lhs) * p.nparts_rhs;
  const std::set<schedule::bucket> before(st.done_before.begin(), st.done_before.end());
  const auto done = st.released.size() + before.size();
  doc["done"] = done;
  doc["training"] = training.size();
  std::int64_t requeued = 0;
  for (const auto& b : st.requeued) requeued += !training.count(b);
  doc["requeued"] = requeued;
  doc["waiting"] = static_cast<std::int64_t>(p.nparts_lhs) * p.nparts_rhs -
                   static_cast<std::int64_t>(done + training.size()) - requeued;
  doc["paused"] = st.admin_paused;
  // Swaps: the partitions trainers loaded, this iteration so far and in the committed ones.
  doc["swaps"] = iteration_swaps(self);
  auto& swaps = doc["swaps_per_iteration"] = nlohmann::json::array();
  for (const auto& [it, n] : st.swaps_per_iteration) swaps.push_back({{"iteration", it}, {"epoch", p.position(it).epoch}, {"swaps", n}});
  // One row per lhs partition: D done, T training, R re-queued, . waiting.
  auto& grid = doc["grid"] = nlohmann::json::array();
  auto& rows = doc["buckets"] = nlohmann::json::array();
  for (int32_t l = 0; l < p.nparts_lhs; ++l) {
    std::string line;
    for (int32_t r = 0; r < p.nparts_rhs; ++r) {
      const schedule::bucket b{l, r};
      nlohmann::json row{{"lhs", l}, {"rhs", r}};
      if (auto d = st.released.find(b); d != st.released.end()) {
        line += 'D';
        row = released_row(b, d->second);
        row["state"] = "done";
      } else if (before.contains(b)) {
        line += 'D';
        row["state"] = "done";
        row["before_resume"] = true; // trained before the mid-iteration commit this run resumed from
      } else if (auto t = training.find(b); t != training.end()) {
        line += 'T';
        row["state"] = "training";
        row["trainer"] = t->second.first;
        row["for_seconds"] = t->second.second;
        row["since_seconds"] = std::max(0.0, now - t->second.second);  // as the header's `seconds`
        if (st.requeued.contains(b)) row["requeued"] = true;
      } else if (st.requeued.contains(b)) {
        line += 'R';
        row["state"] = "re-queued";
      } else {
        line += '.';
        row["state"] = "waiting";
      }
      rows.push_back(std::move(row));
    }
    grid.push_back(std::move(line));
  }
  return doc;
}

// Which roles a view needs asked (the console's `watch buckets` asks every second).
struct asked_roles {
  bool trainers = false, partition_servers = false, shards = false;
};

asked_roles roles_for(std::string_view view) {
  if (view == "buckets" || view == "trainers") return {true, false, false};
  if (view == "partitions") return {true, true, false};
  if (view == "params") return {false, false, true};
  return {true, true, true}; // nodes: the bytes each holds
}

// Asks the `asked` roles of every live node what they hold (a trainer's
// status, a partition server's list, a parameter-server shard's counters; a
// second at most each: they answer while kernels run), then runs `done`
// with one row per node of the cluster.
void gather(coordinator_pointer self, asked_roles asked, std::function<void(std::vector<node_holdings>&)> done) {
  auto& st = self->state;
  auto rows = std::make_shared<std::vector<node_holdings>>(st.nodes.size());
  auto pending = std::make_shared<std::size_t>(1); // released after the last request is sent
  auto one = [rows, pending, done] {
    if (--*pending == 0) done(*rows);
  };
  const auto trainers = nodes_with(self, role::trainer);
  for (std::size_t i = 0; i < st.nodes.size(); ++i) {
    auto& row = (*rows)[i];
    row.name = st.cs.cluster.nodes[i].name;
    if (auto t = std::find(trainers.begin(), trainers.end(), i); t != trainers.end())
      row.trainer = static_cast<uint32_t>(t - trainers.begin());
    const auto& slot = st.nodes[i];
    if (!slot.alive || !slot.m) continue;
    const auto& m = *slot.m;
    const auto timeout = std::chrono::seconds(1);
    if (asked.trainers && m.trainer) {
      ++*pending;
      self->request(m.trainer, timeout, msg::status_atom::value)
        .then([rows, i, one](msg::trainer_status& s) { (*rows)[i].trainer_status = std::move(s), one(); },
              [one](caf::error&) { one(); });
    }
    if (asked.partition_servers && m.partition_server) {
      ++*pending;
      self->request(m.partition_server, timeout, msg::list_atom::value)
        .then([rows, i, one](std::vector<msg::partition_info>& l) { (*rows)[i].stored = std::move(l), one(); },
              [one](caf::error&) { one(); });
    }
    if (asked.shards && m.parameter_server && shares_parameters(self)) {
      ++*pending;
      self->request(m.parameter_server, timeout, msg::status_atom::value)
        .then([rows, i, one](msg::param_status& s) { (*rows)[i].shard = s, one(); }, [one](caf::error&) { one(); });
    }
  }
  one();
}

std::string view_of(coordinator_pointer self, const std::string& view, std::vector<node_holdings>& rows) {
  std::vector<std::pair<uint32_t, msg::trainer_actor>> trainers;
  std::vector<std::optional<msg::trainer_status>> statuses;
  for (auto& [id, t] : live_trainers(self)) {
    trainers.emplace_back(id, t);
    statuses.emplace_back();
    for (auto& r : rows)
      if (r.trainer == id) statuses.back() = r.trainer_status;
  }
  if (view == "buckets") return buckets_view(self, trainers, statuses).dump();
  if (view == "trainers") return trainers_view(self, trainers, statuses).dump();
  if (view == "nodes") {
    auto doc = nodes_view(self);
    for (std::size_t i = 0; i < rows.size(); ++i) {
      if (!self->state.nodes[i].alive) continue;
      const auto held = held_by(rows[i]);
      doc["nodes"][i]["partition_bytes"] = held.partitions;
      doc["nodes"][i]["parameter_bytes"] = held.parameters;
    }
    return doc.dump();
  }
  auto doc = run_header(self, view);
  doc.update(view == "partitions" ? partition_rows(rows) : param_rows(rows));
  return doc.dump();
}

caf::result<std::string> inspect(coordinator_pointer self, const std::string& view) {
  if (std::find(msg::views.begin(), msg::views.end(), view) == msg::views.end())
    return caf::make_error(caf::sec::invalid_argument,
                           fmt::format("no view '{}': the views are {}", view, fmt::join(msg::views, ", ")));
  if (view == "events") return events_view(self).dump();
  if (view == "log") return log_view(self).dump();
  auto promise = self->make_response_promise<std::string>();
  if (view == "traffic")
    ask_nodes(self, [self, promise]() mutable { promise.deliver(traffic_view(self).dump()); });
  else
    gather(self, roles_for(view), [self, promise, view](std::vector<node_holdings>& rows) mutable {
      promise.deliver(view_of(self, view, rows));
    });
  return promise;
}

// --- ending --------------------------------------------------------------------------

// Tells every other live node to exit; `then` runs once each has answered
// or cannot (gone, or silent for 5 s), so that the coordinator's node, which
// exits after it, does not take the message down unsent.
void finish_nodes(coordinator_pointer self, int32_t code, const std::string& why, std::function<void()> then) {
  auto& st = self->state;
  std::vector<msg::node_actor> told;
  for (std::size_t i = 0; i < st.nodes.size(); ++i)
    if (st.nodes[i].alive && st.nodes[i].m->node && i != st.cs.cluster.coordinator()) told.push_back(st.nodes[i].m->node);
  if (told.empty()) return then();
  auto pending = std::make_shared<std::size_t>(told.size());
  auto one = [pending, then] {
    if (--*pending == 0) then();
  };
  for (auto& n : told)
    self->request(n, std::min<caf::timespan>(st.cs.limits.request, std::chrono::seconds(5)), msg::finish_atom::value, code,
                  why)
      .then([one](bool) { one(); }, [one](caf::error&) { one(); });
}

// The admin consoles waiting for a commit hear how it went.
void answer_checkpoints(coordinator_pointer self, const std::string& text, bool ok) {
  auto& st = self->state;
  for (auto& p : st.checkpoint_waiters) {
    if (ok)
      p.deliver(text);
    else
      p.deliver(caf::make_error(caf::sec::runtime_error, text));
  }
  st.checkpoint_waiters.clear();
}

void abort_trainers(coordinator_pointer self) {
  for (auto& [id, t] : live_trainers(self))
    self->request(t, self->state.cs.limits.request, msg::abort_atom::value).then([](bool) {}, [](caf::error&) {});
}

void fail(coordinator_pointer self, const std::string& why) {
  auto& st = self->state;
  if (st.ph == phase::over) return;
  st.ph = phase::over;
  answer_checkpoints(self, "nothing was committed: the run failed: " + why, false);
  abort_trainers(self);
  finish_nodes(self, 1, why, [self, why] {
    auto& s = self->state;
    if (s.run_promise) {
      s.run_promise->deliver(caf::make_error(caf::sec::runtime_error, why));
      s.run_promise.reset();
    } else {
      s.early_result = why;
    }
  });
}

void succeed(coordinator_pointer self) {
  auto& st = self->state;
  if (st.ph == phase::over) return;
  st.ph = phase::over;
  st.summary.seconds = seconds_since(st.run_start);
  answer_checkpoints(self, fmt::format("the run ended; its last committed checkpoint is version {}",
                                       st.summary.checkpoint_version), st.summary.stopped_by_console != 0);
  auto deliver = [self] {
    auto& s = self->state;
    if (s.run_promise) {
      s.run_promise->deliver(s.summary);
      s.run_promise.reset();
    } else {
      s.early_ok = true;
    }
  };
  if (st.summary.stopped_by_console) {
    finish_nodes(self, 0,
                 fmt::format("stopped by an admin console; the last committed checkpoint is version {}: run the "
                             "same command again to resume from it",
                             st.summary.checkpoint_version),
                 deliver);
  } else if (st.summary.stopped) {
    abort_trainers(self);
    finish_nodes(self, 1,
                 fmt::format("the run was stopped on the coordinator's node; the last committed checkpoint is version {}",
                             st.summary.checkpoint_version),
                 deliver);
  } else {
    finish_nodes(self, 0, st.cs.check_only ? "the cluster check passed" : "training is done", deliver);
  }
}

// A stop asked for ends the run now: a console's (a clean end) with the
// trainers' work dropped, a signal's as an interrupted run (succeed()).
void stop_now(coordinator_pointer self) {
  auto& st = self->state;
  if (st.summary.stopped_by_console)
    abort_trainers(self);
  else
    st.summary.stopped = true;
  succeed(self);
}

// --- the run -------------------------------------------------------------------------

void start_iteration(coordinator_pointer self);
void rollback(coordinator_pointer self, const std::string& why);

msg::trainer_setup setup_for(coordinator_pointer self, uint32_t trainer) {
  auto& st = self->state;
  msg::trainer_setup s;
  s.trainer = trainer;
  s.generation = st.generation;
  s.events = caf::actor_cast<msg::events_actor>(self);
  s.lock = lock_server(self);
  for (auto& ps : partition_servers(self, nodes_with(self, role::trainer)[trainer])) {
    s.partition_servers.push_back(ps.actor);
    s.partition_bulk.push_back(ps.bulk);
  }
  s.parameter_servers = parameter_servers(self);
  s.seed = st.cs.seed;
  s.held_out_seed = st.cs.held_out_seed;
  for (auto& e : st.shared.entries) {
    auto v = st.shared.values(e);
    s.shared.push_back({e.name, msg::tensor::make(e.shape, std::vector<float>(v.begin(), v.end()))});
  }
  return s;
}

void set_up_trainer(coordinator_pointer self, uint32_t id, const msg::trainer_actor& t, std::function<void()> done) {
  auto idx = nodes_with(self, role::trainer);
  self->state.nodes[idx[id]].setup_generation = self->state.generation;
  self->request(t, self->state.cs.limits.request, msg::setup_atom::value, setup_for(self, id))
    .then([done](bool) { if (done) done(); },
          [self, id, done](caf::error& e) {
            log(self, fmt::format("trainer {} ({}) could not be set up: {}", id, trainer_node(self, id),
                                  self->system().render(e)));
            if (done) done();
          });
}

// The servers get the start point (the last commit after a rollback), then
// the lock server and the trainers start over from it.
void trace(coordinator_pointer self, const std::string& what) {
  if (plan_of(self).cfg->verbose >= 1) log(self, "coordinator: " + what);
}

void prepare(coordinator_pointer self) {
  auto& st = self->state;
  trace(self, fmt::format("seeding the servers (generation {})", st.generation + 1));
  st.ph = phase::preparing;
  ++st.generation;
  const bool first = !st.prepared_once;
  const std::uint64_t base_version = (st.generation << 32) + 1;
  seed_targets targets{partition_servers(self, st.cs.cluster.coordinator()), server_nodes(self), parameter_servers(self)};
  const auto seed = st.cs.seed;
  auto* sys = &self->system();
  const auto* p = st.cs.plan;
  const auto deadline = st.cs.limits.request;
  const bool early = p->cfg->early_stopping && p->cfg->eval_fraction > 0;
  st.jobs->post(
    caf::actor_cast<msg::coordinator_actor>(self),
    [=](io_result& r) {
      auto start = train::open_start(*p, [&r](const std::string& line) { r.log.push_back(line); });
      if (!start) {
        r.error = start.error().message;
        return;
      }
      r.first_iteration = start->first_iteration;
      r.next_version = start->next_version;
      for (const auto& [lhs, rhs] : start->buckets_done) r.buckets_done.push_back({lhs, rhs});
      r.shared = start->shared;
      // early_stopping compares whole epochs of held-out loss; a resumed run
      // first replays the committed ones.
      if (first && early) {
        r.stopping.emplace();
        const auto paths = static_cast<std::int64_t>(p->cfg->edge_paths.size());
        auto replayed = r.stopping->replay(
          fs::path(p->cfg->checkpoint_path) / "training_stats.json", start->first_iteration,
          [&](std::int64_t epoch, std::int64_t path, std::int64_t chunk) -> std::int64_t {
            if (path < 0 || path >= paths || chunk < 0 || chunk >= p->chunks) return -1;
            return p->iteration_of({epoch, path, chunk, false});
          });
        if (!replayed) {
          r.error = replayed.error().message;
          return;
        }
        if (auto rise = r.stopping->first_rise(start->first_iteration / p->iterations_per_epoch())) {
          r.log.push_back(fmt::format("early_stopping: this run already stopped after epoch {} (held-out loss {:.6g}, "
                                      "up from {:.6g}); nothing to train",
                                      rise->epoch + 1, rise->loss, rise->previous));
          r.early_stopped_epoch = rise->epoch;
          r.nothing_to_train = true;
          return;
        }
      }
      if (start->first_iteration >= p->iterations) {
        r.log.push_back("every iteration of this config is already in the checkpoint; nothing to train");
        r.nothing_to_train = true;
        return;
      }
      auto seeded = seed_servers(*sys, *p, *start, seed, base_version, targets, deadline);
      if (!seeded) {
        r.error = seeded.error().message;
        r.lost_peer = seeded.error().lost_peer;
        return;
      }
      r.tables_linked = seeded->linked;
      // The tables seeded straight from the checkpoint resumed are, until
      // trained, what it holds: the first commit keeps their files.
      if (start->resume && start->reader) {
        r.committed.manifest = start->reader->manifest();
        for (auto t : p->all_tables()) {
          const auto* held = r.committed.manifest->table(p->type_name(t.type), t.part);
          if (held != nullptr && held->rows == p->count(t))
            r.committed.versions[{p->type_name(t.type), static_cast<int32_t>(t.part)}] = base_version;
        }
      }
    },
    [self, first, base_version](io_result& r) {
      auto& s = self->state;
      for (auto& line : r.log) log(self, line);
      if (s.ph != phase::preparing) return;
      if (r.tables_linked > 0)
        trace(self, fmt::format("{} table(s) linked from the checkpoint into the partition store", r.tables_linked));
      if (!r.error.empty() && r.lost_peer) return rollback(self, r.error);
      if (!r.error.empty()) return fail(self, r.error);
      if (first) {
        s.prepared_once = true;
        s.summary.first_iteration = r.first_iteration;
        s.summary.checkpoint_version = r.next_version - 1;
        s.stopping = std::move(r.stopping);
      }
      s.iteration = r.first_iteration;
      s.resume_done = std::move(r.buckets_done);
      s.next_version = r.next_version;
      s.shared = std::move(r.shared);
      s.committed = std::move(r.committed);
      if (r.nothing_to_train) {
        if (r.early_stopped_epoch) s.summary.early_stopped_epoch = *r.early_stopped_epoch;
        return succeed(self);
      }
      const auto generation = s.generation;
      self->request(lock_server(self), s.cs.limits.request, msg::reset_atom::value, base_version)
        .then(
          [self, generation](bool) {
            auto trainers = live_trainers(self);
            trace(self, fmt::format("servers seeded; setting up {} trainer(s)", trainers.size()));
            auto pending = std::make_shared<std::size_t>(trainers.size());
            auto all_set = [self, generation, pending] {
              if (--*pending > 0 || self->state.generation != generation || self->state.ph != phase::preparing) return;
              start_iteration(self);
            };
            if (trainers.empty()) return start_iteration(self);
            for (auto& [id, t] : trainers) set_up_trainer(self, id, t, all_set);
          },
          [self](caf::error& e) { fail(self, "the lock server did not reset: " + self->system().render(e)); });
    });
}

void start_iteration(coordinator_pointer self) {
  auto& st = self->state;
  const auto& p = plan_of(self);
  if (st.stop_requested) return stop_now(self);
  if (st.iteration >= p.iterations) return succeed(self);
  st.ph = phase::training;
  // Trainers that joined while the servers were seeded start now.
  for (auto& [id, t] : live_trainers(self))
    if (st.nodes[nodes_with(self, role::trainer)[id]].setup_generation != st.generation) set_up_trainer(self, id, t, {});
  st.released.clear();
  st.released_at_commit = 0;
  st.requeued.clear();
  st.done_before = std::exchange(st.resume_done, {});
  st.iteration_start = clock_type::now();
  // Each node's traffic now: the traffic view's "this iteration" starts here.
  ask_nodes(self, [self, it = st.iteration] {
    if (self->state.iteration != it) return;
    for (auto& n : self->state.nodes) n.at_iteration = n.status;
  });
  const auto it = st.iteration;
  trace(self, fmt::format("iteration {} starts", it));
  // The lock server keeps pausing across iterations and resets; an admin
  // console's pause holds here too, a drain for a commit is over.
  self->request(lock_server(self), st.cs.limits.request, msg::pause_atom::value, st.admin_paused)
    .then([](bool) {}, [](caf::error&) {});
  self->request(lock_server(self), st.cs.limits.request, msg::start_atom::value, static_cast<int32_t>(it),
                st.done_before)
    .then(
      [self](bool ok) {
        if (!ok) fail(self, "the lock server refused to start the iteration: partitions of the last one are still held");
      },
      [self](caf::error& e) { fail(self, "the lock server did not start the iteration: " + self->system().render(e)); });
}

node::iteration_report report_of(coordinator_pointer self) {
  auto& st = self->state;
  const auto& p = plan_of(self);
  auto pos = p.position(st.iteration);
  node::iteration_report r;
  r.epoch = pos.epoch;
  r.edge_path = pos.edge_path;
  r.edge_chunk = pos.edge_chunk;
  r.iteration = st.iteration;
  r.iterations = p.iterations;
  double loss = 0;
  for (auto& [b, s] : st.released) {
    r.edges += s.edges;
    loss += s.loss;
    r.kernel_seconds += s.seconds;
    r.swap_seconds += s.fetch_seconds;
    r.loads += s.fetched;
    r.read_ahead += s.read_ahead;
    r.eval_before.merge(s.eval_before);
    r.eval_after.merge(s.eval_after);
  }
  r.buckets = static_cast<std::int64_t>(st.released.size());
  r.loss = r.edges > 0 ? loss / static_cast<double>(r.edges) : 0.0;
  r.seconds = seconds_since(st.iteration_start);
  return r;
}

// The buckets of this iteration trained so far, in grid order.
std::vector<std::array<std::int32_t, 2>> buckets_done(coordinator_pointer self) {
  auto& st = self->state;
  std::set<schedule::bucket> all(st.done_before.begin(), st.done_before.end());
  for (auto& [b, s] : st.released) all.insert(b);
  std::vector<std::array<std::int32_t, 2>> out;
  for (auto& b : all) out.push_back({b.lhs, b.rhs});
  return out;
}

void committed_mid_iteration(coordinator_pointer self);

// `mid`: an admin console's checkpoint or stop, with every trainer drained
// mid-iteration: the version lists the buckets done and the iteration goes on
// (or the run stops) after it.
void commit(coordinator_pointer self, bool mid) {
  auto& st = self->state;
  const auto& p = plan_of(self);
  auto report = report_of(self);
  auto pos = p.position(st.iteration);
  if (mid) {
    pos.epoch_complete = false;
    pos.buckets_done = buckets_done(self);
  }
  nlohmann::json stats = {{"epoch", pos.epoch},       {"edge_path", pos.edge_path}, {"edge_chunk", pos.edge_chunk},
                          {"edges", report.edges},    {"loss", report.loss},        {"seconds", report.seconds},
                          {"seed", st.cs.seed}};
  // PBG writes the held-out evaluation there too: the iteration's buckets together.
  if (report.eval_before.count > 0) {
    stats["eval_stats_before"] = report.eval_before.to_json();
    stats["eval_stats_after"] = report.eval_after.to_json();
  }
  commit_request request{st.next_version, pos, stats};
  checkpoint_sources sources;
  sources.partition_servers = partition_servers(self, st.cs.cluster.coordinator());
  sources.server_nodes = server_nodes(self);
  for (auto& [id, t] : live_trainers(self)) sources.trainers.push_back(t);
  auto* sys = &self->system();
  const auto* pp = st.cs.plan;
  const auto toml = st.cs.config_toml;
  const auto deadline = st.cs.limits.request;
  const auto generation = st.generation;
  st.jobs->post(
    caf::actor_cast<msg::coordinator_actor>(self),
    [=, last = st.committed](io_result& r) {
      auto done = commit_checkpoint(*sys, *pp, toml, request, sources, last, deadline);
      if (!done) {
        r.error = done.error().message;
        r.lost_peer = done.error().lost_peer;
      } else {
        r.shared = std::move(done->shared);
        r.committed = std::move(done->committed);
        r.tables_written = done->tables_written;
        r.tables_kept = done->tables_kept;
        r.tables_linked = done->tables_linked;
        r.log = std::move(done->log);
      }
    },
    [self, report, generation, mid](io_result& r) mutable {
      auto& s = self->state;
      if (s.ph != phase::finishing || s.generation != generation) return;
      // A server lost while gathering: this iteration is redone from the last commit.
      if (!r.error.empty() && r.lost_peer) return rollback(self, r.error);
      if (!r.error.empty()) return fail(self, r.error);
      for (auto& line : r.log) log(self, line);
      s.shared = std::move(r.shared);
      s.committed = std::move(r.committed);
      trace(self, fmt::format("checkpoint version {}: {} table(s) written ({} linked from the partition store), {} "
                              "unchanged kept",
                              s.next_version, r.tables_written, r.tables_linked, r.tables_kept));
      report.checkpoint_version = s.next_version;
      s.summary.checkpoint_version = s.next_version++;
      if (mid) return committed_mid_iteration(self);
      if (s.draining != drain_goal::none) {
        answer_checkpoints(self, fmt::format("committed checkpoint version {} (iteration {} of {} done)",
                                             report.checkpoint_version, s.iteration + 1, report.iterations),
                           true);
        if (s.draining == drain_goal::stop) s.stop_requested = true, s.summary.stopped_by_console = 1;
        s.draining = drain_goal::none;
      }
      s.summary.edges += report.edges;
      ++s.summary.iterations_run;
      s.swaps_per_iteration.emplace_back(s.iteration, iteration_swaps(self));
      if (s.swaps_per_iteration.size() > s.max_events) s.swaps_per_iteration.pop_front();
      if (s.cs.callbacks.iteration_done) s.cs.callbacks.iteration_done(report);
      note(self, fmt::format("iteration {} done (epoch {}, edge path {}, chunk {}): {} edges, checkpoint version {}",
                             s.iteration + 1, report.epoch, report.edge_path, report.edge_chunk, report.edges,
                             report.checkpoint_version));
      const auto trained = plan_of(self).position(s.iteration);
      ++s.iteration;
      if (s.stopping) {
        s.stopping->add(trained.epoch, report.eval_after);
        if (auto rise = trained.epoch_complete ? s.stopping->first_rise(trained.epoch + 1) : std::nullopt) {
          log(self, fmt::format("early_stopping: held-out loss {:.6g} after epoch {}, up from {:.6g}; training stops here",
                                rise->loss, rise->epoch + 1, rise->previous));
          s.summary.early_stopped_epoch = rise->epoch;
          return succeed(self);
        }
      }
      start_iteration(self);
    });
}

// Several machines: two exchange rounds, one machine after the other, leave
// every machine's copy equal to the parameter servers' sums.
void sync_then_commit(coordinator_pointer self, bool mid = false) {
  auto& st = self->state;
  st.ph = phase::finishing;
  if (!shares_parameters(self)) return commit(self, mid);
  auto order = std::make_shared<std::vector<msg::trainer_actor>>();
  for (int round = 0; round < 2; ++round)
    for (auto& [id, t] : live_trainers(self)) order->push_back(t);
  auto next = std::make_shared<std::function<void(std::size_t)>>();
  const auto generation = st.generation;
  *next = [self, order, next, generation, mid](std::size_t k) {
    if (self->state.ph != phase::finishing || self->state.generation != generation) return;
    if (k == order->size()) return commit(self, mid);
    self->request((*order)[k], self->state.cs.limits.request, msg::sync_atom::value)
      .then([next, k](bool) { (*next)(k + 1); },
            [next, k](caf::error&) { (*next)(k + 1); });  // a trainer lost meanwhile: the others go on
  };
  (*next)(0);
}

// --- an admin console (docs/console.md, "Steering a run") -------------------------------

std::int64_t total_buckets(coordinator_pointer self) {
  return static_cast<std::int64_t>(plan_of(self).nparts_lhs) * plan_of(self).nparts_rhs;
}

void pause_lock_server(coordinator_pointer self, bool on) {
  self->request(lock_server(self), self->state.cs.limits.request, msg::pause_atom::value, on)
    .then([](bool) {}, [](caf::error&) {});
}

// The drain is over: the run stops (stop) or goes on where it was (checkpoint).
void end_drain(coordinator_pointer self, const std::string& stop_line = {}) {
  auto& st = self->state;
  if (std::exchange(st.draining, drain_goal::none) == drain_goal::stop) {
    if (!stop_line.empty()) log(self, stop_line);
    st.summary.stopped_by_console = 1;
    return succeed(self);
  }
  st.ph = phase::training;
  if (!st.admin_paused) pause_lock_server(self, false);
}

void committed_mid_iteration(coordinator_pointer self) {
  auto& st = self->state;
  const auto version = st.summary.checkpoint_version;
  const auto done = st.released.size() + st.done_before.size();
  const auto since = st.released.size() - std::exchange(st.released_at_commit, st.released.size());
  log(self, fmt::format("checkpoint version {} committed mid-iteration {} ({} of {} buckets done), {}", version,
                        st.iteration + 1, done, total_buckets(self),
                        st.checkpoint_waiters.empty()
                          ? fmt::format("{} bucket(s) after the last commit (checkpoint_every_buckets)", since)
                          : std::string("as an admin console asked")));
  answer_checkpoints(self, fmt::format("committed checkpoint version {} mid-iteration {}: {} of {} buckets done",
                                       version, st.iteration + 1, done, total_buckets(self)),
                     true);
  end_drain(self);
}

void nothing_to_commit(coordinator_pointer self) {
  const auto version = self->state.summary.checkpoint_version;
  answer_checkpoints(self, fmt::format("nothing was trained since checkpoint version {}; it stays the resume point",
                                       version),
                     true);
  end_drain(self, fmt::format("stopped by an admin console; nothing was trained since checkpoint version {}", version));
}

// No bucket is handed out until every trainer has written back what it
// holds, then the version is committed; an epoch that ends meanwhile is
// committed as usual (epoch_done), which serves the same purpose.
void drain_and_commit(coordinator_pointer self, drain_goal goal) {
  auto& st = self->state;
  const bool draining = st.draining != drain_goal::none;
  if (goal == drain_goal::stop || !draining) st.draining = goal;
  if (draining || st.ph != phase::training) return; // finishing: the commit under way serves it
  const auto generation = st.generation;
  const auto iteration = st.iteration;
  // However long the buckets being trained take.
  self->request(lock_server(self), caf::infinite, msg::pause_atom::value, true)
    .then(
      [self, generation, iteration](bool drained) {
        auto& s = self->state;
        if (!drained || s.generation != generation || s.iteration != iteration || s.ph != phase::training ||
            s.draining == drain_goal::none)
          return;
        if (static_cast<std::int64_t>(s.released.size() + s.done_before.size()) >= total_buckets(self))
          return; // the epoch is done: epoch_done commits it
        // No bucket trained since the last commit: a version listing none
        // would read as a finished iteration, and the last one serves.
        if (s.released.empty()) return nothing_to_commit(self);
        sync_then_commit(self, true);
      },
      [self](caf::error& e) {
        auto& s = self->state;
        s.draining = drain_goal::none;
        answer_checkpoints(self, "the lock server did not pause: " + self->system().render(e), false);
      });
}

// checkpoint_every_buckets = N: a commit mid-iteration once N buckets were
// trained since the last one, so that what is trained but not committed (the
// disk holds it beside the committed version) stays bounded; the last
// buckets of an iteration go into its own commit.
void commit_if_due(coordinator_pointer self) {
  auto& st = self->state;
  const auto every = plan_of(self).cfg->checkpoint_every_buckets;
  if (every <= 0 || st.draining != drain_goal::none || st.ph != phase::training) return;
  if (static_cast<std::int64_t>(st.released.size() + st.done_before.size()) >= total_buckets(self)) return;
  if (static_cast<std::int64_t>(st.released.size() - st.released_at_commit) < every) return;
  drain_and_commit(self, drain_goal::checkpoint);
}

// `by_console`: an admin console's stop, a clean end (exit status 0), not
// an interruption.
void request_stop(coordinator_pointer self, const std::string& why, bool by_console = false) {
  auto& s = self->state;
  if (s.stop_requested || s.ph == phase::over) return;
  s.stop_requested = true;
  if (by_console) s.summary.stopped_by_console = 1;
  log(self, why);
  // Training or waiting: stop now (the iteration would not be committed
  // anyway). Seeding or committing: stop once that is done.
  if (s.ph == phase::training || s.ph == phase::rolling_back || s.ph == phase::joining) stop_now(self);
}

caf::result<std::string> on_admin(coordinator_pointer self, const std::string& command) {
  auto& st = self->state;
  // Only the inspector (same process) passes commands on, once it checked
  // their proof; a peer that reached this actor by other means is refused.
  const auto& sender = self->current_sender();
  if (!sender || sender->node() != self->node())
    return caf::make_error(caf::sec::invalid_argument, "admin commands reach the coordinator through its inspector only");
  if (st.ph == phase::over) return caf::make_error(caf::sec::invalid_argument, "the run is over");
  if (st.cs.check_only) return caf::make_error(caf::sec::invalid_argument, "a cluster check trains nothing to steer");
  if (command == "pause") {
    if (st.admin_paused) return std::string("already paused");
    st.admin_paused = true;
    log(self, "paused by an admin console: no bucket is handed out until it resumes the run");
    if (st.ph == phase::training || st.ph == phase::finishing) pause_lock_server(self, true);
    return std::string("paused: no bucket is handed out; the buckets being trained finish and their partitions are "
                       "written back (`resume` goes on)");
  }
  if (command == "resume") {
    if (!st.admin_paused) return std::string("not paused");
    st.admin_paused = false;
    log(self, "resumed by an admin console");
    if (st.draining == drain_goal::none && (st.ph == phase::training || st.ph == phase::finishing))
      pause_lock_server(self, false);
    return std::string("resumed: buckets are handed out again");
  }
  if (command == "checkpoint") {
    if (st.ph != phase::training && st.ph != phase::finishing)
      return caf::make_error(caf::sec::invalid_argument,
                             fmt::format("nothing to commit now: the run is {}; its last committed checkpoint is "
                                         "version {}",
                                         phase_name(st.ph), st.summary.checkpoint_version));
    auto promise = self->make_response_promise<std::string>();
    st.checkpoint_waiters.push_back(promise);
    drain_and_commit(self, drain_goal::checkpoint);
    return promise;
  }
  if (command == "stop") {
    if (st.ph != phase::training && st.ph != phase::finishing) {
      auto answer = fmt::format("stopping now (the run is {}); its last committed checkpoint is version {}",
                                phase_name(st.ph), st.summary.checkpoint_version);
      request_stop(self, "stopping, as an admin console asked: the interrupted iteration is not committed", true);
      return answer;
    }
    log(self, "stopping after the buckets being trained, as an admin console asked");
    drain_and_commit(self, drain_goal::stop);
    return std::string("stopping: the buckets being trained finish, their partitions are written back, a checkpoint "
                       "is committed, then the run ends");
  }
  return caf::make_error(caf::sec::invalid_argument,
                         fmt::format("no command '{}': the commands are pause, resume, checkpoint and stop", command));
}

// --- membership ------------------------------------------------------------------------

void wait_for_servers(coordinator_pointer self);

void node_lost(coordinator_pointer self, std::size_t i, const std::string& why) {
  auto& st = self->state;
  auto& slot = st.nodes[i];
  if (!slot.alive) return;
  slot.alive = false;
  for (auto it = st.watched.begin(); it != st.watched.end();)
    it = it->second == i ? st.watched.erase(it) : std::next(it);
  const auto& spec = st.cs.cluster.nodes[i];
  if (st.ph == phase::over) return;
  log(self, fmt::format("{} lost: {}", node_label(self, i), why));
  if (spec.has(role::lock_server) || spec.has(role::coordinator))
    return fail(self, fmt::format("{} was lost ({}); relaunch every node to resume from the last committed checkpoint",
                                  node_label(self, i), why));
  if (spec.has(role::trainer)) {
    auto idx = nodes_with(self, role::trainer);
    auto id = static_cast<uint32_t>(std::find(idx.begin(), idx.end(), i) - idx.begin());
    self->request(lock_server(self), st.cs.limits.request, msg::leave_atom::value, id).then([](bool) {}, [](caf::error&) {});
  }
  if (st.ph == phase::joining) return;
  if (st.ph == phase::checking) return fail(self, fmt::format("{} was lost during the cluster check ({})", node_label(self, i), why));
  // Partitions, shared parameters, or the only copy of them (one trainer, no
  // parameter servers) went with the node: back to the last commit.
  if (holds_state(spec, shares_parameters(self)) || (spec.has(role::trainer) && !shares_parameters(self)))
    return rollback(self, fmt::format("{} was lost", node_label(self, i)));
  if (live_trainers(self).empty())
    log(self, "no trainer is left; waiting for a trainer node to join again");
}

void rollback(coordinator_pointer self, const std::string& why) {
  auto& st = self->state;
  if (st.ph == phase::over) return;
  // Stopping (a signal reaches every node `abg cluster up` started, so nodes
  // go while the coordinator commits): nothing more is trained, so nothing
  // waits for the lost node to come back; the last commit is the resume point.
  if (st.stop_requested) {
    log(self, fmt::format("{} while stopping: the last committed checkpoint, version {}, is the resume point", why,
                          st.summary.checkpoint_version));
    return stop_now(self);
  }
  if (st.ph != phase::rolling_back) {
    ++st.summary.rollbacks;
    log(self, fmt::format("{}: rolling back to checkpoint version {} once it is back", why,
                          st.summary.checkpoint_version));
  }
  st.ph = phase::rolling_back;
  ++st.generation;
  // A commit an admin console waits for cannot happen now; a stop it asked
  // for stops once the servers are back (nothing more is trained).
  if (st.draining != drain_goal::none) {
    answer_checkpoints(self, fmt::format("{}: the run rolls back to checkpoint version {}; nothing was committed",
                                         why, st.summary.checkpoint_version),
                       false);
    if (st.draining == drain_goal::stop) st.stop_requested = true, st.summary.stopped_by_console = 1;
    st.draining = drain_goal::none;
  }
  // No trainer may write to a server after its abort is answered: the
  // servers are seeded again only after every live trainer answered.
  auto trainers = live_trainers(self);
  auto pending = std::make_shared<std::size_t>(trainers.size());
  const auto generation = st.generation;
  if (trainers.empty()) return wait_for_servers(self);
  for (auto& [id, t] : trainers)
    self->request(t, st.cs.limits.request, msg::abort_atom::value)
      .then(
        [self, pending, generation](bool) {
          if (--*pending == 0 && self->state.generation == generation) wait_for_servers(self);
        },
        [self, pending, generation](caf::error&) {
          if (--*pending == 0 && self->state.generation == generation) wait_for_servers(self);
        });
}

void wait_for_servers(coordinator_pointer self) {
  auto& st = self->state;
  if (st.ph != phase::rolling_back) return;
  auto missing = missing_nodes(self, true);
  bool trainer = !live_trainers(self).empty();
  if (missing.empty() && trainer) return prepare(self);
  if (st.waiting_since_generation == st.generation) return;  // the deadline of this wait is set
  st.waiting_since_generation = st.generation;
  after(self, st.cs.limits.server_wait, [self, generation = st.generation] {
    auto& s = self->state;
    if (s.generation != generation || s.ph != phase::rolling_back) return;
    auto lost = missing_nodes(self, true, true);
    if (live_trainers(self).empty()) lost.push_back("any trainer");
    if (lost.empty()) return prepare(self);
    fail(self, fmt::format("{} did not come back within {} s; relaunch every node to resume from checkpoint version {}",
                           fmt::join(lost, ", "),
                           std::chrono::duration_cast<std::chrono::seconds>(s.cs.limits.server_wait).count(),
                           s.summary.checkpoint_version));
  });
}

// --- the pre-flight check (`--check`): nothing is trained --------------------------------

// Every node joined, so each runs this abg with this config and (checked
// before it joined) this data. What is left: each node's memory against what
// it will hold, and every node reaching every other one directly.
void run_check(coordinator_pointer self) {
  auto& st = self->state;
  st.ph = phase::checking;
  auto lines = std::make_shared<std::vector<std::string>>();
  auto failures = std::make_shared<std::vector<std::string>>();
  const auto needs = train::node_memory_needs(plan_of(self), st.cs.cluster);
  const auto coordinator_node = st.cs.cluster.coordinator();
  for (std::size_t i = 0; i < st.nodes.size(); ++i) {
    const auto& m = *st.nodes[i].m;
    const auto& name = st.cs.cluster.nodes[i].name;
    lines->push_back(fmt::format("check {}: joined{}; abg {}, the coordinator's config and data", node_label(self, i),
                                 i == coordinator_node ? "" : fmt::format(" from {}:{}", m.host, m.port), m.abg_version));
    const auto& need = needs[i];
    const bool fits = m.mem_available == 0 || need.total() <= m.mem_available;
    lines->push_back(fmt::format("check node {}: memory: holds up to {} (partitions {}, trainer {}, parameters {}, "
                                 "checkpoint {}) of {} available: {}",
                                 name, size_text(need.total()), size_text(need.partitions), size_text(need.trainer),
                                 size_text(need.parameters), size_text(need.checkpoint),
                                 m.mem_available == 0 ? std::string("an unknown amount") : size_text(m.mem_available),
                                 fits ? "ok" : "NOT ENOUGH"));
    if (!fits)
      failures->push_back(fmt::format("node {} needs {} of memory and has {} available", name, size_text(need.total()),
                                      size_text(m.mem_available)));
  }
  // Nodes on one machine share its memory: together they must fit too.
  std::map<std::string, std::vector<std::size_t>> by_host;
  for (std::size_t i = 0; i < st.nodes.size(); ++i) by_host[st.nodes[i].m->host].push_back(i);
  for (auto& [host, on] : by_host) {
    if (on.size() < 2 || host.empty()) continue;
    std::uint64_t need = 0, available = ~std::uint64_t{0};
    std::vector<std::string> names;
    for (auto i : on) {
      need += needs[i].total();
      if (st.nodes[i].m->mem_available != 0) available = std::min(available, st.nodes[i].m->mem_available);
      names.push_back(st.cs.cluster.nodes[i].name);
    }
    if (available == ~std::uint64_t{0}) continue;
    const bool fits = need <= available;
    lines->push_back(fmt::format("check host {}: nodes {} together hold up to {} of {} available: {}", host,
                                 fmt::join(names, ", "), size_text(need), size_text(available), fits ? "ok" : "NOT ENOUGH"));
    if (!fits)
      failures->push_back(fmt::format("the nodes on host {} need {} of memory together and it has {} available", host,
                                      size_text(need), size_text(available)));
  }
  auto done = [self, lines, failures] {
    for (auto& line : *lines) log(self, line);
    if (failures->empty()) {
      log(self, "the cluster check passed");
      return succeed(self);
    }
    fail(self, fmt::format("the cluster check failed: {}", fmt::join(*failures, "; ")));
  };
  // Partitions move between nodes directly: every node dials every other
  // (each reached the coordinator's node when it joined), and reaches the
  // bulk channels of the partition servers on the other nodes.
  struct ask {
    std::size_t node;
    bool probe; // bulk channels (probe), else CAF connections (peers)
    std::vector<std::string> endpoints;
  };
  std::vector<ask> asks;
  for (std::size_t i = 0; i < st.nodes.size(); ++i) {
    const auto& m = *st.nodes[i].m;
    if (!m.node) continue;
    ask peers{i, false, {}}, bulk{i, true, {}};
    for (std::size_t j = 0; j < st.nodes.size(); ++j) {
      if (j == i) continue;
      const auto& other = *st.nodes[j].m;
      if (i != coordinator_node && j != coordinator_node && !other.host.empty())
        peers.endpoints.push_back(fmt::format("{}:{}", other.host, other.port));
      if (!other.partition_bulk.empty()) bulk.endpoints.push_back(other.partition_bulk);
    }
    if (!peers.endpoints.empty()) asks.push_back(std::move(peers));
    if (!bulk.endpoints.empty()) asks.push_back(std::move(bulk));
  }
  if (asks.empty()) return done();
  auto pending = std::make_shared<std::size_t>(asks.size());
  for (auto& a : asks) {
    const auto name = st.cs.cluster.nodes[a.node].name;
    const auto what = a.probe ? fmt::format("the bulk channels of the {} other partition server(s)", a.endpoints.size())
                              : fmt::format("the {} other node(s) besides the coordinator's", a.endpoints.size());
    auto answered = [=](const caf::error& e) {
      if (!e) {
        lines->push_back(fmt::format("check node {}: reaches {}: ok", name, what));
      } else {
        auto why = fmt::format("node {} cannot reach {}: {}", name, what, self->system().render(e));
        lines->push_back("check " + why);
        failures->push_back(why);
      }
      if (--*pending == 0) done();
    };
    const auto& node = st.nodes[a.node].m->node;
    auto reply = a.probe ? self->request(node, st.cs.limits.request, msg::probe_atom::value, std::move(a.endpoints))
                         : self->request(node, st.cs.limits.request, msg::peers_atom::value, std::move(a.endpoints));
    std::move(reply).then([answered](bool) { answered(caf::none); }, [answered](caf::error& e) { answered(e); });
  }
}

std::string check_member(coordinator_pointer self, const msg::member& m, std::size_t i) {
  auto& st = self->state;
  const auto& spec = st.cs.cluster.nodes[i];
  if (m.abg_version != st.cs.abg_version)
    return fmt::format("node {} runs abg {}, the coordinator abg {}; run the same version everywhere", m.name,
                       m.abg_version, st.cs.abg_version);
  if (m.dataset != st.cs.dataset)
    return fmt::format("node {} has dataset {} in its entity_path, the coordinator dataset {}; give every node the "
                       "same imported data",
                       m.name, m.dataset, st.cs.dataset);
  if (m.config_digest != st.cs.config_digest)
    return fmt::format("node {} was started with another training config than the coordinator (digest {} vs {}); "
                       "start every node with the same config",
                       m.name, m.config_digest, st.cs.config_digest);
  if ((m.check_only != 0) != st.cs.check_only)
    return fmt::format("node {} was started {} --check and the coordinator {}; start every node the same way", m.name,
                       m.check_only ? "with" : "without", st.cs.check_only ? "with it" : "without it");
  auto roles_match = [&](role r, bool present) {
    return spec.has(r) == present;
  };
  if (!roles_match(role::trainer, static_cast<bool>(m.trainer)) ||
      !roles_match(role::partition_server, static_cast<bool>(m.partition_server)) ||
      !roles_match(role::parameter_server, static_cast<bool>(m.parameter_server)) ||
      !roles_match(role::lock_server, static_cast<bool>(m.lock_server)))
    return fmt::format("node {} does not host the roles the cluster gives it", m.name);
  return {};
}

caf::result<bool> on_join(coordinator_pointer self, msg::member m) {
  auto& st = self->state;
  auto found = st.cs.cluster.find(m.name);
  if (!found) {
    std::vector<std::string> names;
    for (auto& n : st.cs.cluster.nodes) names.push_back(n.name);
    return caf::make_error(caf::sec::invalid_argument,
                           fmt::format("no node is named '{}' in this cluster (its nodes: {})", m.name, fmt::join(names, ", ")));
  }
  const auto i = *found;
  if (auto why = check_member(self, m, i); !why.empty()) {
    log(self, "refused a node: " + why);
    return caf::make_error(caf::sec::invalid_argument, why);
  }
  if (st.ph == phase::over) return caf::make_error(caf::sec::invalid_argument, "the run is over");
  if (st.nodes[i].alive) node_lost(self, i, "a new process joined under its name");
  if (st.ph == phase::over) return caf::make_error(caf::sec::invalid_argument, "the run is over");
  auto watch = [&](const auto& h) {
    if (!h) return;
    st.watched[h.address()] = i;
    self->monitor(h);
  };
  watch(m.node);
  watch(m.trainer);
  watch(m.partition_server);
  watch(m.parameter_server);
  watch(m.lock_server);
  const bool rejoin = st.nodes[i].m.has_value();
  if (m.lock_server)  // sent before anything else to it, so it is in place when the first epoch starts
    self->request(m.lock_server, st.cs.limits.request, msg::subscribe_atom::value,
                  caf::actor_cast<msg::events_actor>(self))
      .then([](bool) {}, [self](caf::error& e) { fail(self, "the lock server did not subscribe: " + self->system().render(e)); });
  st.nodes[i].m = std::move(m);
  st.nodes[i].alive = true;
  const auto& n = *st.nodes[i].m;
  if (!n.host.empty() && i != st.cs.cluster.coordinator())
    log(self, fmt::format("{} {} from {}:{}", node_label(self, i), rejoin ? "joined again" : "joined", n.host, n.port));
  // Direct connections to the other nodes (a node that joins late dials them all).
  if (n.node && !n.host.empty() && i != st.cs.cluster.coordinator()) {
    std::vector<std::string> peers;
    for (std::size_t j = 0; j < st.nodes.size(); ++j)
      if (j != i && j != st.cs.cluster.coordinator() && st.nodes[j].alive && !st.nodes[j].m->host.empty() &&
          (rejoin || st.ph != phase::joining || j < i))
        peers.push_back(fmt::format("{}:{}", st.nodes[j].m->host, st.nodes[j].m->port));
    if (!peers.empty())
      self->request(n.node, st.cs.limits.request, msg::peers_atom::value, peers)
        .then([](bool) {},
              [self, i](caf::error& e) {
                log(self, fmt::format("{} could not reach its peers: {}", node_label(self, i), self->system().render(e)));
              });
  }
  switch (st.ph) {
    case phase::joining:
      if (missing_nodes(self, false).empty()) {
        log(self, fmt::format("all {} node(s) joined", st.nodes.size()));
        if (st.cs.check_only)
          run_check(self);
        else
          prepare(self);
      }
      break;
    case phase::rolling_back:
      wait_for_servers(self);
      break;
    case phase::training:
    case phase::finishing:
    case phase::preparing:
      // A trainer node back: it trains from the current shared parameters
      // (its sharer brings them up to date) once set up; while the servers
      // are seeded, start_iteration sets it up.
      if (n.trainer && st.ph != phase::preparing) {
        auto idx = nodes_with(self, role::trainer);
        auto id = static_cast<uint32_t>(std::find(idx.begin(), idx.end(), i) - idx.begin());
        set_up_trainer(self, id, n.trainer, {});
      }
      break;
    case phase::checking:  // a node of the check joined again: the check ends without it (node_lost)
    case phase::over:
      break;
  }
  return true;
}

// Every heartbeat interval, each node's memory and traffic (the console's
// nodes view); an answer is the node's heartbeat.
void poll_nodes(coordinator_pointer self) {
  if (self->state.ph == phase::over) return;
  ask_nodes(self, [] {});
  after(self, self->state.cs.cluster.heartbeat_interval, [self] { poll_nodes(self); });
}

msg::coordinator_actor::behavior_type coordinator(coordinator_pointer self, coordinator_setup setup) {
  auto& init = self->state;
  init.cs = std::move(setup);
  init.nodes.resize(init.cs.cluster.nodes.size());
  init.summary.seed = init.cs.seed;
  init.summary.buckets_per_trainer.assign(init.cs.cluster.count(role::trainer), 0);
  init.edges_per_trainer.assign(init.cs.cluster.count(role::trainer), 0);
  init.spent_per_trainer.assign(init.cs.cluster.count(role::trainer), {});
  init.jobs = std::make_unique<job_runner<io_result>>(std::string(to_string(role::coordinator)));
  // A pre-flight check trains nothing and writes no checkpoint: its lines are the console's only.
  init.lines = std::make_unique<run_log>(init.cs.check_only ? fs::path{}
                                                            : fs::path(init.cs.plan->cfg->checkpoint_path) / "run.log");
  self->set_down_handler([self](caf::down_msg& dm) {
    auto& s = self->state;
    auto it = s.watched.find(dm.source);
    if (it == s.watched.end()) return;
    auto i = it->second;
    node_lost(self, i, dm.reason ? self->system().render(dm.reason) : "it exited");
  });
  after(self, init.cs.cluster.heartbeat_interval, [self] { poll_nodes(self); });
  flush_log(self);
  after(self, init.cs.limits.join, [self] {
    if (self->state.ph == phase::joining)
      fail(self, fmt::format("node(s) {} did not join within {} s; start them (same cluster file, same config)",
                             fmt::join(missing_nodes(self, false), ", "),
                             std::chrono::duration_cast<std::chrono::seconds>(self->state.cs.limits.join).count()));
  });
  return {
      [self](msg::data_atom) { return self->state.cs.data; },
      [self](msg::join_atom, msg::member& m) -> caf::result<bool> { return on_join(self, std::move(m)); },
      [self](msg::run_atom) -> caf::result<msg::run_summary> {
        auto& s = self->state;
        if (s.run_promise) return caf::make_error(caf::sec::runtime_error, "the run was already asked for");
        if (s.early_result) return caf::make_error(caf::sec::runtime_error, *s.early_result);
        if (s.early_ok) return s.summary;
        s.run_promise = self->make_response_promise<msg::run_summary>();
        return *s.run_promise;
      },
      [self](msg::stop_atom) -> bool {
        request_stop(self, "stopping: the interrupted iteration is not committed");
        return true;
      },
      [self](msg::released_atom, const bucket_stats& s) {
        auto& st = self->state;
        if (st.ph != phase::training || s.epoch != st.iteration) return;
        st.released[s.trained] = s;
        st.requeued.erase(s.trained);
        if (s.trainer < st.summary.buckets_per_trainer.size()) ++st.summary.buckets_per_trainer[s.trainer];
        if (s.trainer < st.edges_per_trainer.size()) st.edges_per_trainer[s.trainer] += s.edges;
        if (s.trainer < st.spent_per_trainer.size()) {
          auto& spent = st.spent_per_trainer[s.trainer];
          spent.kernel += s.seconds, spent.fetch += s.fetch_seconds, spent.lock_wait += s.lock_wait_seconds;
          spent.loaded += s.fetched;
        }
        if (st.cs.callbacks.bucket_done) {
          const auto& p = plan_of(self);
          node::bucket_report r;
          r.iteration = st.iteration;
          r.iterations = p.iterations;
          r.lhs = s.trained.lhs;
          r.rhs = s.trained.rhs;
          r.trainer = s.trainer;
          r.edges = s.edges;
          r.seconds = s.seconds;
          r.loss = s.loss;
          r.done = static_cast<std::int64_t>(st.released.size() + st.done_before.size());
          r.total = static_cast<std::int64_t>(p.nparts_lhs) * p.nparts_rhs;
          for (auto& [b, x] : st.released) r.iteration_edges += x.edges;
          r.iteration_seconds = seconds_since(st.iteration_start);
          st.cs.callbacks.bucket_done(r);
        }
        commit_if_due(self);
      },
      [self](msg::requeued_atom, uint32_t trainer, const std::vector<schedule::bucket>& buckets) {
        auto& st = self->state;
        for (auto& b : buckets) st.released.erase(b), st.requeued.insert(b);
        if (st.ph == phase::over) return;
        std::vector<std::string> names;
        for (auto& b : buckets) names.push_back(schedule::to_string(b));
        log(self, fmt::format("trainer {} ({}) is gone; {}", trainer, trainer_node(self, trainer),
                              buckets.empty() ? std::string("it held no bucket")
                                              : fmt::format("bucket(s) {} re-queued", fmt::join(names, ", "))));
      },
      [self](msg::epoch_done_atom, int32_t epoch) {
        auto& st = self->state;
        if (st.ph != phase::training || epoch != st.iteration) return;
        sync_then_commit(self);
      },
      [self](msg::failed_atom, const std::string& why) { fail(self, why); },
      [self](msg::tick_atom, uint64_t token) {
        auto& st = self->state;
        auto it = st.timers.find(token);
        if (it == st.timers.end()) return;
        auto fn = std::move(it->second);
        st.timers.erase(it);
        fn();
      },
      [self](msg::stalled_atom, uint32_t trainer, const std::string& why) {
        auto& st = self->state;
        if (st.ph == phase::over) return;
        log(self, fmt::format("trainer {} ({}) lost a peer and dropped what it held: {}", trainer,
                              trainer_node(self, trainer), why));
        self->request(lock_server(self), st.cs.limits.request, msg::leave_atom::value, trainer)
          .then([](bool) {}, [](caf::error&) {});
        // If a server is gone, the coordinator notices within the heartbeat
        // timeout and rolls back (a new generation sets every trainer up);
        // otherwise the trainer starts over then.
        after(self, 2 * st.cs.limits.heartbeat, [self, trainer, generation = st.generation] {
          auto& s = self->state;
          if (s.generation != generation || (s.ph != phase::training && s.ph != phase::finishing)) return;
          for (auto& [id, t] : live_trainers(self))
            if (id == trainer) set_up_trainer(self, id, t, {});
        });
      },
      [self](msg::job_done_atom, uint64_t token) { self->state.jobs->done(token); },
      [self](msg::inspect_atom, const std::string& view) -> caf::result<std::string> { return inspect(self, view); },
      [self](msg::admin_atom, const std::string& command) -> caf::result<std::string> { return on_admin(self, command); },
      [self](msg::log_atom, msg::log_line& line) { on_log_line(self, line); },
  };
}

}  // namespace

msg::coordinator_actor spawn_coordinator(caf::actor_system& sys, coordinator_setup setup) {
  return sys.spawn(coordinator, std::move(setup));
}

}  // namespace abg::actors
