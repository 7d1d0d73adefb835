// Trainer: acquire a bucket from the lock server -> write back and unlock the
// partitions it no longer needs -> fetch those it lacks -> train (the bucket
// kernel, runtime/train) -> release, until stopped. The actor only reacts to
// messages; everything that blocks runs as a job on its worker thread, which
// alone touches the machine's tables and parameters. Beside the kernel an I/O
// thread writes back what the grant dropped and reads ahead what the next
// bucket will need (grant::ahead), within the buffer's capacity.
#include <algorithm>
#include <chrono>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

#include <fmt/format.h>

#include "abg/model/model.h"
#include "actors/blocking_peer.h"
#include "actors/job_thread.h"
#include "actors/param_sharer.h"
#include "actors/partition_client.h"
#include "actors/spawn.h"
#include "runtime/train/bucket_step.h"
#include "runtime/train/edge_source.h"

namespace abg::actors {
namespace {

using msg::bucket_stats;
using msg::grant;
using schedule::part_key;
using train::type_partition;
using clock_type = std::chrono::steady_clock;

double seconds_since(clock_type::time_point start) {
  return std::chrono::duration<double>(clock_type::now() - start).count();
}

// How often a machine's sharer exchanges in the background (PBG's sharer
// loops continuously; a bucket takes far longer than this).
constexpr std::chrono::milliseconds sharing_period{50};

msg::tensor to_message(const torch::Tensor& t) {
  auto c = t.detach().to(torch::kFloat).contiguous();
  const float* d = c.data_ptr<float>();
  return msg::tensor::make(std::vector<int64_t>(c.sizes().begin(), c.sizes().end()),
                           std::vector<float>(d, d + c.numel()));
}

// The machine: what the worker thread's jobs read and write.
struct machine {
  const train::plan* p = nullptr;
  caf::actor_system* sys = nullptr;
  deadlines limits;
  trainer_hooks hooks;
  msg::trainer_setup setup;
  model::shared_params params;
  std::unique_ptr<param_sharer> sharer;
  std::map<type_partition, model::table> tables;
  std::map<part_key, uint64_t> versions; // of the partitions held
  std::set<type_partition> changed;      // tables held that a bucket trained on since they were fetched
  // A partition's tables as fetched. Those read ahead (grant::ahead) while
  // the last bucket trained, not locked, wait in `read_ahead`: the next
  // grant's fetch takes them when at its version or later.
  struct fetched_partition {
    uint64_t version = 0;
    std::map<type_partition, model::table> tables;
  };
  std::map<part_key, fetched_partition> read_ahead;
  // Partitions taken out of the machine to be written back and unlocked.
  struct outgoing {
    part_key key;
    uint64_t version = 0; // as held
    bool changed = false;
    std::vector<std::pair<type_partition, model::table>> tables;
  };
  std::atomic<bool> stop{false};
  // What `status` reports of the tables held: written by the worker thread
  // as they change, read by the actor while the kernel runs.
  mutable std::mutex held_mutex;
  std::vector<msg::partition_info> held;
  std::uint64_t parameter_bytes = 0;

  std::vector<partition_server_ref> servers; // from the setup
  // The I/O of the buckets before, which may run on beside the next
  // kernels: write-backs, then reads ahead and handovers (their copies come
  // back when joined). A bucket that fetches nothing starts without waiting
  // for it; a bucket that fetches, and every other job, joins it first, so
  // what was dropped has left memory before anything more arrives.
  // Declared last: its future, from std::async, waits for it when destroyed.
  std::future<expected<std::map<part_key, fetched_partition>>> io;
  const partition_server_ref& server_of(type_partition t) const { return actors::server_of(servers, t.part); }
  msg::partition_key key_of(type_partition t) const { return {p->type_name(t.type), static_cast<int32_t>(t.part)}; }
  void log(const std::string& line) const {
    if (hooks.log) hooks.log(line);
  }

  // Waits for the I/O still running; its reads wait in `read_ahead`.
  expected<void> join_io() {
    if (!io.valid()) return {};
    auto read = io.get();
    if (!read) return std::unexpected(read.error());
    read_ahead.merge(*read);
    note_held();
    return {};
  }

  void drop_everything() {
    (void)join_io(); // a stall set `stop`: it ends at its next request
    sharer.reset();
    tables.clear();
    versions.clear();
    changed.clear();
    read_ahead.clear();
    note_held();
  }

  void note_held() {
    std::vector<msg::partition_info> now;
    for (const auto& [t, table] : tables) {
      const auto lock = p->lock_of(t);
      auto v = lock ? versions.find(*lock) : versions.end();
      now.push_back({key_of(t), v == versions.end() ? 0 : v->second, static_cast<uint64_t>(table.count()),
                     table.embeddings.size(1), table.state_width()});
    }
    for (const auto& [k, copy] : read_ahead)
      for (const auto& [t, table] : copy.tables)
        now.push_back({key_of(t), copy.version, static_cast<uint64_t>(table.count()), table.embeddings.size(1),
                       table.state_width()});
    std::uint64_t bytes = 0;
    for (const auto& [name, t] : param_sharer::shared_tensors(params))
      bytes += static_cast<std::uint64_t>(t.numel() * t.element_size());
    std::lock_guard lock(held_mutex);
    held = std::move(now);
    parameter_bytes = bytes;
  }

  expected<void> set_up(msg::trainer_setup s) {
    drop_everything();
    setup = std::move(s);
    if (setup.partition_servers.empty()) return fail("trainer {} was set up without partition servers", setup.trainer);
    servers.clear();
    for (std::size_t k = 0; k < setup.partition_servers.size(); ++k)
      servers.push_back({setup.partition_servers[k], k < setup.partition_bulk.size() ? setup.partition_bulk[k] : ""});
    params = model::shared_params::init(p->model);
    storage::shared_tensors shared;
    for (auto& t : setup.shared) {
      auto values = t.value.values();
      if (auto ok = shared.add(t.name, t.value.shape, values); !ok) return ok;
    }
    if (auto ok = params.load(shared); !ok) return std::unexpected(ok.error());
    if (!setup.parameter_servers.empty()) {
      sharer = std::make_unique<param_sharer>(*sys, setup.parameter_servers, limits.request, &stop);
      for (auto& [name, t] : param_sharer::shared_tensors(params)) sharer->add(name, t);
      sharer->start(sharing_period);
    }
    note_held();
    return {};
  }

  // Takes the partitions out of the machine, to be written back (send_back).
  expected<std::vector<outgoing>> take(const std::vector<part_key>& keys) {
    std::vector<outgoing> out;
    for (const auto& k : keys) {
      auto v = versions.find(k);
      if (v == versions.end()) return fail("trainer {} was told to write back {} it does not hold", setup.trainer, k.part);
      outgoing o{k, v->second, false, {}};
      for (auto t : p->tables_of(k)) {
        o.changed = o.changed || changed.contains(t);
        changed.erase(t);
        if (auto it = tables.find(t); it != tables.end()) {
          o.tables.emplace_back(t, std::move(it->second));
          tables.erase(it);
        }
      }
      versions.erase(k);
      out.push_back(std::move(o));
    }
    note_held();
    return out;
  }

  // Writes the partitions back (version + 1 each) and unlocks them. One that
  // no bucket changed (every bucket it was in had no edges) is not written:
  // it is unlocked at the version it had, and the next commit keeps its file.
  // Reads only what the setup fixed: it runs on the I/O thread beside the kernel.
  expected<void> send_back(std::vector<outgoing> out) const {
    if (out.empty()) return {};
    std::vector<schedule::part_version> written;
    for (auto& o : out) {
      if (!o.changed) {
        written.push_back({o.key, o.version});
        continue;
      }
      for (const auto& [t, table] : o.tables)
        if (auto ok = store_table(*sys, server_of(t), key_of(t), table, o.version + 1, o.version, limits.request, &stop);
            !ok)
          return ok;
      written.push_back({o.key, o.version + 1});
    }
    out.clear(); // their memory goes before anything is read into the slot
    blocking_peer lock(*sys, setup.lock, limits.request, &stop);
    auto ok = lock.ask<bool>("cannot unlock partitions", msg::unlock_atom::value, setup.trainer, written);
    if (!ok) return std::unexpected(ok.error());
    if (!*ok) return fail("the lock server refused the partitions written back");
    return {};
  }

  expected<void> write_back(const std::vector<part_key>& keys) {
    if (auto ok = join_io(); !ok) return ok;
    auto out = take(keys);
    if (!out) return std::unexpected(out.error());
    return send_back(std::move(*out));
  }

  // Every table of a partition, at least at version w.version. Reads only
  // what the setup fixed: the I/O thread reads ahead with it.
  expected<fetched_partition> fetch_partition(const schedule::part_version& w) const {
    fetched_partition copy;
    std::optional<uint64_t> version;
    for (auto t : p->tables_of(w.key)) {
      auto got = fetch_table(*sys, server_of(t), key_of(t), w.version, limits.request, &stop);
      if (!got) return std::unexpected(got.error());
      if (version && *version != got->version)
        return fail("partition {} came back at versions {} and {} for its entity types", w.key.part, *version,
                    got->version);
      version = got->version;
      copy.tables[t] = std::move(got->table);
    }
    copy.version = version.value_or(w.version);
    return copy;
  }

  // Reads partitions ahead of the grant that will lock them (the I/O thread).
  expected<std::map<part_key, fetched_partition>> read_ahead_of(const std::vector<schedule::part_version>& ahead) const {
    std::map<part_key, fetched_partition> out;
    for (const auto& a : ahead) {
      auto copy = fetch_partition(a);
      if (!copy) return std::unexpected(copy.error());
      out[a.key] = std::move(*copy);
    }
    return out;
  }

  // The partitions handed to this trainer's reservation (grant::awaited)
  // while its kernel runs, each read ahead once the lock server says it is
  // ours; asked every 20 ms until all `awaited` came or the kernel is done.
  expected<void> read_handed(std::map<part_key, fetched_partition>& out, std::size_t awaited,
                             const std::atomic<bool>& kernel_done) const {
    blocking_peer lock(*sys, setup.lock, limits.request, &stop);
    for (std::size_t got = 0; got < awaited && !kernel_done && !stop;) {
      auto handed = lock.ask<std::vector<schedule::part_version>>("cannot ask for the partitions handed over",
                                                                   msg::handed_atom::value, setup.trainer);
      if (!handed) return std::unexpected(handed.error());
      for (const auto& h : *handed) {
        auto copy = fetch_partition(h);
        if (!copy) return std::unexpected(copy.error());
        out[h.key] = std::move(*copy);
        ++got;
      }
      if (handed->empty()) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return {};
  }

  bool has_read_ahead(const schedule::part_version& w) const {
    auto r = read_ahead.find(w.key);
    return r != read_ahead.end() && r->second.version >= w.version;
  }

  expected<void> fetch(const std::vector<schedule::part_version>& wanted) {
    // Copies read ahead that this grant does not take leave the slot first.
    std::erase_if(read_ahead, [&](const auto& entry) {
      return std::none_of(wanted.begin(), wanted.end(), [&](const auto& w) {
        return w.key == entry.first && entry.second.version >= w.version;
      });
    });
    for (const auto& w : wanted) {
      fetched_partition copy;
      if (auto r = read_ahead.find(w.key); r != read_ahead.end()) {
        copy = std::move(r->second);
        read_ahead.erase(r);
      } else if (auto got = fetch_partition(w); got) {
        copy = std::move(*got);
      } else {
        return std::unexpected(got.error());
      }
      for (auto& [t, table] : copy.tables) tables[t] = std::move(table);
      versions[w.key] = copy.version;
    }
    note_held();
    return {};
  }

  // Unpartitioned tables stay with the trainer for the whole run; with several
  // machines they are shared through the parameter servers like the parameters.
  expected<void> fetch_unpartitioned(schedule::bucket b) {
    for (auto t : p->partitions_of(b)) {
      if (!p->unpartitioned(t.type) || tables.contains(t)) continue;
      auto got = fetch_table(*sys, server_of(t), key_of(t), 0, limits.request, &stop);
      if (!got) return std::unexpected(got.error());
      tables[t] = std::move(got->table);
      // The partition server's copy may be older than the parameter servers'
      // value: the sharer's first exchange brings it up to date.
      if (sharer) {
        sharer->add(shared_table_name(p->type_name(t.type)), tables[t].embeddings);
        if (auto ok = sharer->sync(); !ok) return ok;
      }
      note_held();
    }
    return {};
  }

  // PBG's hogwild_delay: in the first epoch, trainers of machine rank > 0
  // wait this long before each bucket, so that rank 0 has started to move
  // the shared parameters away from their initial values. Rank 0, and every
  // trainer of a one-machine run, never waits. A stop ends the wait.
  void hogwild_delay(const grant& g) {
    if (p->position(g.epoch).epoch != 0 || setup.trainer == 0 || p->cfg->hogwild_delay <= 0) return;
    log(fmt::format("trainer {} waits hogwild_delay = {} s before bucket ({}, {}) (first epoch)", setup.trainer,
                    p->cfg->hogwild_delay, g.assigned.lhs, g.assigned.rhs));
    const auto until = clock_type::now() + std::chrono::duration<double>(p->cfg->hogwild_delay);
    while (clock_type::now() < until && !stop) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }

  expected<bucket_stats> train(const grant& g) {
    hogwild_delay(g);
    const auto t0 = clock_type::now();
    if (!g.fetch.empty())
      if (auto ok = join_io(); !ok) return std::unexpected(ok.error());
    const auto read_ahead_used = static_cast<std::size_t>(
      std::count_if(g.fetch.begin(), g.fetch.end(), [&](const auto& w) { return has_read_ahead(w); }));
    auto dropped = take(g.drop);
    if (!dropped) return std::unexpected(dropped.error());
    // Written back beside the kernel when memory allows it: without a limit,
    // or when all this bucket fetches was read ahead into the slot. Else
    // first, so what the grant drops leaves before what it fetches arrives.
    const bool beside = p->cfg->buffer_capacity == 0 || read_ahead_used == g.fetch.size();
    if (!beside) {
      if (auto ok = send_back(std::move(*dropped)); !ok) return std::unexpected(ok.error());
      dropped->clear();
    }
    if (auto ok = fetch(g.fetch); !ok) return std::unexpected(ok.error());
    if (auto ok = fetch_unpartitioned(g.assigned); !ok) return std::unexpected(ok.error());
    // The I/O beside the kernel, after that of the buckets before: the
    // write-back first (it frees the memory the read-ahead slot takes), then
    // the next bucket's partitions. Then, while the kernel runs, what other
    // trainers hand over to the reserved next bucket; that stops once the
    // kernel is done, on every way out of here. The I/O may outlast the
    // kernel: the next bucket that fetches waits for it.
    auto kernel_done = std::make_shared<std::atomic<bool>>(false);
    struct set_on_exit {
      std::atomic<bool>& flag;
      ~set_on_exit() { flag = true; }
    } kernel_exit{*kernel_done};
    if (!dropped->empty() || !g.ahead.empty() || !g.awaited.empty())
      io = std::async(std::launch::async,
                      [this, before = std::move(io), written = std::move(*dropped), ahead = g.ahead,
                       awaited = g.awaited.size(), kernel_done]() mutable -> expected<std::map<part_key, fetched_partition>> {
                        std::map<part_key, fetched_partition> out;
                        if (before.valid()) {
                          auto earlier = before.get();
                          if (!earlier) return earlier;
                          out = std::move(*earlier);
                        }
                        if (auto ok = send_back(std::move(written)); !ok) return std::unexpected(ok.error());
                        auto read = read_ahead_of(ahead);
                        if (!read) return read;
                        out.merge(*read);
                        if (awaited == 0) return out;
                        if (auto ok = read_handed(out, awaited, *kernel_done); !ok) return std::unexpected(ok.error());
                        return out;
                      });
    double fetch_seconds = seconds_since(t0);
    train::bucket_tables bt;
    bt.lhs.resize(p->model.entity_types.size());
    bt.rhs.resize(p->model.entity_types.size());
    for (auto t : p->lhs_types) bt.lhs[t] = tables.at({t, p->unpartitioned(t) ? 0 : g.assigned.lhs});
    for (auto t : p->rhs_types) bt.rhs[t] = tables.at({t, p->unpartitioned(t) ? 0 : g.assigned.rhs});
    const auto pos = p->position(g.epoch);
    auto edges = train::load_edges(*p, pos.edge_path, g.assigned, pos.edge_chunk);
    if (!edges) return std::unexpected(edges.error());
    train::bucket_step_input in{g.epoch, g.assigned, setup.seed, setup.held_out_seed};
    auto r = train::run_bucket_step(*p, in, bt, params, std::move(*edges), stop, hooks.log);
    *kernel_done = true;
    if (!r) return std::unexpected(r.error());
    if (r->stats.edges > 0) {
      for (auto t : p->lhs_types)
        if (!p->unpartitioned(t)) changed.insert({t, g.assigned.lhs});
      for (auto t : p->rhs_types)
        if (!p->unpartitioned(t)) changed.insert({t, g.assigned.rhs});
    }
    bucket_stats out;
    out.trainer = setup.trainer;
    out.epoch = g.epoch;
    out.trained = g.assigned;
    out.edges = r->stats.edges;
    out.chunk_edges = r->chunk_edges;
    out.loss = r->stats.loss;
    out.seconds = r->stats.seconds;
    out.fetch_seconds = fetch_seconds;
    out.fetched = static_cast<uint32_t>(g.fetch.size());
    out.read_ahead = static_cast<uint32_t>(read_ahead_used);
    if (r->before && r->after) {
      out.eval_before = *r->before;
      out.eval_after = *r->after;
      if (hooks.bucket_evaluated) {
        node::bucket_eval_report report;
        report.epoch = pos.epoch;
        report.edge_path = pos.edge_path;
        report.edge_chunk = pos.edge_chunk;
        report.iteration = g.epoch;
        report.lhs = g.assigned.lhs;
        report.rhs = g.assigned.rhs;
        report.edges = r->chunk_edges;
        report.trained = r->stats.edges;
        report.held_out = r->held_out;
        report.before = *r->before;
        report.after = *r->after;
        report.eval_seconds = r->eval_seconds;
        hooks.bucket_evaluated(report);
      }
    }
    return out;
  }

  // The shared parameters (values and Adagrad state) and the unpartitioned
  // tables held, but those named in `skip`.
  std::vector<msg::named_tensor> shared_state(const std::vector<std::string>& skip) const {
    auto skipped = [&](const std::string& n) { return std::find(skip.begin(), skip.end(), n) != skip.end(); };
    std::vector<msg::named_tensor> out;
    auto ck = params.to_checkpoint();
    for (auto& e : ck.entries) {
      if (skipped(e.name)) continue;
      auto v = ck.values(e);
      out.push_back({e.name, msg::tensor::make(e.shape, std::vector<float>(v.begin(), v.end()))});
    }
    for (const auto& [t, table] : tables) {
      if (!p->unpartitioned(t.type)) continue;
      if (!skipped(shared_table_name(p->type_name(t.type)))) out.push_back({shared_table_name(p->type_name(t.type)), to_message(table.embeddings)});
      if (!skipped(shared_table_state_name(p->type_name(t.type))))
        out.push_back({shared_table_state_name(p->type_name(t.type)), to_message(table.state)});
    }
    return out;
  }
};

// A job's outcome, handed from the worker thread to the actor.
struct job_result {
  std::string error;
  bool lost_peer = false;  // the error is a lost peer, not a fault
  bucket_stats stats;
  std::vector<msg::named_tensor> tensors;
};

struct trainer_state {
  trainer_state() = default;  // not an aggregate: CAF would construct it from the actor pointer
  ~trainer_state() {
    if (m) m->stop = true;  // the running kernel stops at its next batch; the worker then joins
  }
  static inline const char* name = "abg.trainer";
  std::unique_ptr<machine> m;
  bool ready = false;      // set up, acquiring and training
  bool acquiring = false;  // an acquire request is out
  bool busy = false;       // a bucket or drop job runs
  uint64_t generation = 0; // of the setup; replies from before a setup are dropped
  schedule::bucket current{};
  clock_type::time_point started{};  // of the job in hand
  clock_type::time_point asked{};    // of the acquire request out
  double lock_wait = 0;              // seconds asking for the next bucket so far
  uint32_t trained = 0;
  // Declared last: destroyed (running job finished, queue dropped, joined) first.
  std::unique_ptr<job_runner<job_result>> jobs;
};

using trainer_pointer = msg::trainer_actor::stateful_pointer<trainer_state>;

// Runs `job` on the worker thread with the machine; `then` gets its result on the actor.
void post(trainer_pointer self, std::function<void(machine&, job_result&)> job, std::function<void(job_result&)> then) {
  self->state.jobs->post(
    caf::actor_cast<msg::trainer_actor>(self), [m = self->state.m.get(), job = std::move(job)](job_result& r) { job(*m, r); },
    std::move(then));
}

// verbose >= 1: what a trainer is told and does.
void trace(trainer_pointer self, const std::string& what) {
  auto& m = *self->state.m;
  if (m.p->cfg->verbose >= 1) m.log(fmt::format("trainer {}: {}", m.setup.trainer, what));
}

// A lost peer: drop everything unsaved (its partitions roll back to the
// servers' copies) and wait for the coordinator to set this trainer up again.
void stall(trainer_pointer self, const std::string& why) {
  auto& st = self->state;
  trace(self, "lost a peer: " + why);
  st.ready = false;
  st.m->stop = true;
  ++st.generation;
  st.lock_wait = 0;
  post(self, [](machine& m, job_result&) { m.drop_everything(); }, [](job_result&) {});
  if (st.m->setup.events) self->send(st.m->setup.events, msg::stalled_atom::value, st.m->setup.trainer, why);
}

void fail_run(trainer_pointer self, const std::string& why) {
  auto& st = self->state;
  const auto text = fmt::format("trainer {}: {}", st.m->setup.trainer, why);
  if (st.m->setup.events) self->send(st.m->setup.events, msg::failed_atom::value, text);
  self->quit(caf::make_error(caf::sec::runtime_error, text));
}

void acquire_next(trainer_pointer self);

void on_grant(trainer_pointer self, grant g) {
  auto& st = self->state;
  if (g.what != grant::kind::wait)
    trace(self, g.what == grant::kind::drop
                  ? fmt::format("writes back {} partition(s), nothing to train now", g.drop.size())
                  : fmt::format("bucket {} of iteration {} (writes back {}, fetches {} partition(s))",
                                schedule::to_string(g.assigned), g.epoch, g.drop.size(), g.fetch.size()));
  st.busy = true;
  st.started = clock_type::now();
  if (g.what != grant::kind::bucket) {
    // Writes back what a drop names. Both it and a wait (nothing named)
    // first join the I/O still running: a trainer told to wait may wait
    // for its own write-back, and an error there, never joined otherwise,
    // stops it here.
    post(
      self,
      [g](machine& m, job_result& r) {
        if (auto ok = m.write_back(g.drop); !ok) {
          r.error = ok.error().message;
          r.lost_peer = ok.error().lost_peer;
        }
      },
      [self, generation = st.generation](job_result& r) {
        auto& s = self->state;
        s.busy = false;
        if (generation != s.generation || !s.ready) return;
        if (!r.error.empty()) return r.lost_peer ? stall(self, r.error) : fail_run(self, r.error);
        acquire_next(self);
      });
    return;
  }
  st.current = g.assigned;
  post(
    self,
    [g, lock_wait = std::exchange(st.lock_wait, 0.0)](machine& m, job_result& r) {
      auto s = m.train(g);
      if (!s) {
        r.error = s.error().message;
        r.lost_peer = s.error().lost_peer;
      } else {
        r.stats = *s;
        r.stats.lock_wait_seconds = lock_wait;
      }
    },
    [self, generation = st.generation](job_result& r) {
      auto& s = self->state;
      s.busy = false;
      if (generation != s.generation || !s.ready) return;  // aborted: the result is dropped
      if (!r.error.empty()) return r.lost_peer ? stall(self, r.error) : fail_run(self, r.error);
      ++s.trained;
      self->request(s.m->setup.lock, s.m->limits.request, msg::release_atom::value, r.stats)
        .then(
          [self, generation](bool ok) {
            if (generation != self->state.generation) return;
            if (!ok) return fail_run(self, "the lock server refused the release of a bucket");
            acquire_next(self);
          },
          [self](caf::error& e) { stall(self, "cannot release a bucket: " + self->system().render(e)); });
    });
}

void acquire_next(trainer_pointer self) {
  auto& st = self->state;
  if (!st.ready || st.acquiring || st.busy) return;
  st.acquiring = true;
  st.asked = clock_type::now();
  self->request(st.m->setup.lock, st.m->limits.request, msg::acquire_atom::value, st.m->setup.trainer)
    .then(
      [self, generation = st.generation](grant g) {
        auto& s = self->state;
        s.acquiring = false;
        s.lock_wait += seconds_since(s.asked);
        if (generation != s.generation) return acquire_next(self);
        on_grant(self, std::move(g));
      },
      [self](caf::error& e) {
        auto& s = self->state;
        s.acquiring = false;
        s.lock_wait += seconds_since(s.asked);
        if (e == caf::sec::request_timeout) return acquire_next(self);
        fail_run(self, "cannot acquire a bucket: " + self->system().render(e));
      });
}

msg::trainer_actor::behavior_type trainer(trainer_pointer self, const train::plan* p, trainer_hooks hooks,
                                          deadlines limits) {
  auto& init = self->state;
  init.m = std::make_unique<machine>();
  init.m->p = p;
  init.m->sys = &self->system();
  init.m->limits = limits;
  init.m->hooks = std::move(hooks);
  init.jobs = std::make_unique<job_runner<job_result>>(std::string(to_string(role::trainer)));
  return {
      [self](msg::setup_atom, msg::trainer_setup& setup) -> caf::result<bool> {
        auto& st = self->state;
        st.ready = false;
        st.m->stop = true;  // a bucket still training stops; its result is dropped
        ++st.generation;
        auto promise = self->make_response_promise<bool>();
        auto lock = setup.lock;
        auto id = setup.trainer;
        post(
          self,
          [setup = std::move(setup)](machine& m, job_result& r) mutable {
            m.stop = false;
            if (auto ok = m.set_up(std::move(setup)); !ok) r.error = ok.error().message;
          },
          [self, promise, lock, id, generation = st.generation](job_result& r) mutable {
            if (generation != self->state.generation) {
              promise.deliver(false);
              return;
            }
            if (!r.error.empty()) {
              promise.deliver(caf::make_error(caf::sec::runtime_error, r.error));
              return;
            }
            self->request(lock, self->state.m->limits.request, msg::enroll_atom::value, id, self->address())
              .then(
                [self, promise, generation](bool) mutable {
                  trace(self, fmt::format("set up (generation {})", generation));
                  promise.deliver(true);
                  auto& s = self->state;
                  if (generation != s.generation) return;
                  s.ready = true;
                  acquire_next(self);
                },
                [promise](caf::error& e) mutable { promise.deliver(std::move(e)); });
          });
        return promise;
      },
      [self](msg::sync_atom) -> caf::result<bool> {
        auto promise = self->make_response_promise<bool>();
        post(
          self,
          [](machine& m, job_result& r) {
            if (!m.sharer) return;
            if (auto ok = m.sharer->sync(); !ok) r.error = ok.error().message;
          },
          [promise](job_result& r) mutable {
            if (r.error.empty()) promise.deliver(true);
            else promise.deliver(caf::make_error(caf::sec::runtime_error, r.error));
          });
        return promise;
      },
      [self](msg::shared_atom, std::vector<std::string>& skip) -> caf::result<std::vector<msg::named_tensor>> {
        auto promise = self->make_response_promise<std::vector<msg::named_tensor>>();
        post(
          self, [skip = std::move(skip)](machine& m, job_result& r) { r.tensors = m.shared_state(skip); },
          [promise](job_result& r) mutable { promise.deliver(std::move(r.tensors)); });
        return promise;
      },
      [self](msg::abort_atom) -> caf::result<bool> {
        auto& st = self->state;
        trace(self, "aborted");
        st.ready = false;
        st.m->stop = true;
        ++st.generation;
        auto promise = self->make_response_promise<bool>();
        post(
          self, [](machine& m, job_result&) { m.drop_everything(); },
          [promise](job_result&) mutable { promise.deliver(true); });
        return promise;
      },
      [self](msg::status_atom) -> msg::trainer_status {
        auto& st = self->state;
        msg::trainer_status out{st.m->setup.trainer, st.busy, st.current, st.trained, {}, 0};
        if (st.busy) out.busy_seconds = seconds_since(st.started);
        std::lock_guard lock(st.m->held_mutex);
        out.held = st.m->held;
        out.parameter_bytes = st.m->parameter_bytes;
        return out;
      },
      [self](msg::job_done_atom, uint64_t token) { self->state.jobs->done(token); },
  };
}

}  // namespace

msg::trainer_actor spawn_trainer(caf::actor_system& sys, const train::plan& p, trainer_hooks hooks, deadlines limits) {
  return sys.spawn(trainer, &p, std::move(hooks), limits);
}

}  // namespace abg::actors
