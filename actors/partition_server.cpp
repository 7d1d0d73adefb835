// Partition server: stores partitions (embeddings + row-wise optimizer state)
// by (entity type, part) with their versions; serves them as explicitly
// requested row chunks and takes them back the same way. In memory, or with
// buffer_capacity > 0 on disk (storage::partition_store: written as puts
// arrive, mapped while served), its files read and written on its job
// thread. With checkpoint_mode = "local" it also writes them into its node's
// checkpoint path and reads them back (actors/local_tables.h), on that thread too.
#include <algorithm>
#include <map>
#include <memory>
#include <set>
#include <type_traits>

#include <fmt/format.h>

#include "abg/storage/host_memory.h"
#include "abg/storage/partition_store.h"
#include "actors/job_thread.h"
#include "actors/local_tables.h"
#include "actors/partition_shapes.h"
#include "actors/spawn.h"

namespace abg::actors {
namespace {

using msg::partition_chunk;
using msg::partition_key;
using msg::tensor;

struct stored_partition {
  tensor embeddings;   // [rows, dim]
  tensor optim_state;  // [rows]
  uint64_t version = 0;
};

// A put on disk as its chunks' jobs write it (only they touch it).
using disk_writer = std::shared_ptr<std::optional<storage::partition_store::put>>;

struct pending_put {
  uint64_t total_rows = 0;
  uint64_t next_row = 0;
  int64_t dim = 0;
  int64_t width = 1;  // optimizer state values per row
  uint64_t version = 0;
  uint64_t base_version = 0;
  std::vector<float> embeddings;  // in memory
  std::vector<float> optim_state; // in memory
  disk_writer writer;             // on disk
};

struct io_result {
  std::string error;
  std::vector<msg::table_file> files;
  std::shared_ptr<const storage::mapped_table> mapped;
};

struct partition_server_state {
  partition_server_state() = default;  // not an aggregate: CAF would construct it from the actor pointer
  ~partition_server_state() {
    jobs.reset();  // the running job first
    // The store is scratch: a run resumes from its checkpoint.
    if (disk) disk->clear();
  }
  partition_server_state(const partition_server_state&) = delete;
  partition_server_state& operator=(const partition_server_state&) = delete;
  static inline const char* name = "abg.partition_server";
  std::map<partition_key, stored_partition> stored;
  std::map<partition_key, pending_put> pending;
  std::string label;
  table_store store;
  std::shared_ptr<const partition_shapes> shapes; // null: any shape
  // On disk (table_store::disk_path set): the store, or why it could not be opened.
  std::unique_ptr<storage::partition_store> disk;
  std::string disk_error;
  // Tables mapped for the gets of their chunks, until the last is served.
  std::map<partition_key, std::shared_ptr<const storage::mapped_table>> mapped;
  // Declared last: destroyed (running job finished, queue dropped, joined) first.
  std::unique_ptr<job_runner<io_result>> jobs;
};

constexpr uint64_t kMaxRows = uint64_t{1} << 34;
constexpr int64_t kMaxDim = int64_t{1} << 20;

using server_pointer = msg::partition_server_actor::stateful_pointer<partition_server_state>;

caf::error bad(server_pointer self, const std::string& why) {
  return caf::make_error(caf::sec::invalid_argument, self->state.label + ": " + why);
}

bool on_disk(const partition_server_state& st) { return st.disk || !st.disk_error.empty(); }

storage::table_key table_key_of(const partition_key& key) { return {key.entity, key.part}; }

std::optional<uint64_t> stored_version(const partition_server_state& st, const partition_key& key) {
  if (st.disk) {
    auto t = st.disk->find(table_key_of(key));
    return t ? std::optional(t->version) : std::nullopt;
  }
  auto it = st.stored.find(key);
  return it == st.stored.end() ? std::nullopt : std::optional(it->second.version);
}

// A put may replace what is stored only when it started from that version
// (a writer declared lost and replaced must not overwrite its successor).
bool base_matches(const partition_server_state& st, const partition_key& key, uint64_t base) {
  return base == msg::any_version || stored_version(st, key) == base;
}

// Runs `work` on the job thread, then answers `promise` with its error, or
// its files (a save) or true.
template <class T>
void post_io(server_pointer self, caf::typed_response_promise<T> promise, std::function<void(io_result&)> work) {
  self->state.jobs->post(caf::actor_cast<msg::partition_server_actor>(self), std::move(work),
                         [self, promise](io_result& r) mutable {
                           if (!r.error.empty())
                             promise.deliver(caf::make_error(caf::sec::runtime_error, self->state.label + ": " + r.error));
                           else if constexpr (std::is_same_v<T, bool>)
                             promise.deliver(true);
                           else
                             promise.deliver(std::move(r.files));
                         });
}

caf::result<std::vector<msg::table_file>> save(server_pointer self, const msg::table_save& job) {
  auto& st = self->state;
  if (job.source.size() > 1 || (job.source.size() == 1 && !job.source.front()))
    return bad(self, fmt::format("a save of {} names {} sources: at most one server to copy from",
                                 msg::to_string(job.key), job.source.size()));
  auto promise = self->make_response_promise<std::vector<msg::table_file>>();
  const auto store = st.store;
  if (job.source.empty() && on_disk(st)) {
    if (!st.disk) return bad(self, st.disk_error);
    const auto version = stored_version(st, job.key);
    if (!version) return bad(self, "cannot save unknown partition " + msg::to_string(job.key));
    if (*version != job.version)
      return bad(self, fmt::format("cannot save {} at version {}: version {} is stored", msg::to_string(job.key),
                                   job.version, *version));
    post_io(self, promise, [store, job, disk = st.disk.get()](io_result& r) {
      // The checkpoint takes the store's files themselves where it can.
      auto linked = link_table(store, job.key, job.commit, job.version, *disk);
      if (!linked) {
        r.error = linked.error().message;
        return;
      }
      if (*linked) {
        r.files = std::move(**linked);
        return;
      }
      auto t = disk->read(table_key_of(job.key));
      if (!t) {
        r.error = t.error().message;
        return;
      }
      if (t->info.version != job.version) {
        r.error = fmt::format("cannot save {} at version {}: version {} was stored meanwhile", msg::to_string(job.key),
                              job.version, t->info.version);
        return;
      }
      const std::int64_t shape[] = {static_cast<std::int64_t>(t->info.rows), t->info.dim};
      auto files = write_table(store, job.key, job.commit, shape, t->embeddings.values, t->state.values);
      if (files) r.files = std::move(*files);
      else r.error = files.error().message;
    });
    return promise;
  }
  if (job.source.empty()) {
    auto it = st.stored.find(job.key);
    if (it == st.stored.end()) return bad(self, "cannot save unknown partition " + msg::to_string(job.key));
    if (it->second.version != job.version)
      return bad(self, fmt::format("cannot save {} at version {}: version {} is stored", msg::to_string(job.key),
                                   job.version, it->second.version));
    post_io(self, promise, [store, job, p = it->second](io_result& r) {
      auto files = write_table(store, job.key, job.commit, p.embeddings.shape, p.embeddings.values(),
                               p.optim_state.values());
      if (files) r.files = std::move(*files);
      else r.error = files.error().message;
    });
    return promise;
  }
  // A replica: the table as the server that holds it has it.
  auto* sys = &self->system();
  post_io(self, promise, [sys, store, job](io_result& r) {
    partition_server_ref source{caf::actor_cast<msg::partition_server_actor>(job.source.front()), job.source_bulk};
    auto got = fetch_table(*sys, source, job.key, job.version, store.limits.request, nullptr, traffic::kind::checkpoints);
    if (!got) {
      r.error = got.error().message;
      return;
    }
    if (got->version != job.version) {
      r.error = fmt::format("the replica of {} came at version {}, not {}", msg::to_string(job.key), got->version,
                            job.version);
      return;
    }
    auto e = got->table.embeddings.contiguous();
    auto s = got->table.state.contiguous();
    const std::int64_t shape[] = {e.size(0), e.size(1)};
    auto files = write_table(store, job.key, job.commit, shape,
                             {e.data_ptr<float>(), static_cast<std::size_t>(e.numel())},
                             {s.data_ptr<float>(), static_cast<std::size_t>(s.numel())});
    if (files) r.files = std::move(*files);
    else r.error = files.error().message;
  });
  return promise;
}

// --- on disk ------------------------------------------------------------------

// Rows [row_offset, row_offset + max_rows) of a mapped table: views into the
// mapping, which the chunk keeps alive; a table served to its end is unmapped
// here once its chunks are gone.
partition_chunk chunk_of(server_pointer self, const partition_key& key,
                         const std::shared_ptr<const storage::mapped_table>& t, uint64_t row_offset,
                         uint64_t max_rows) {
  const auto rows = t->info.rows;
  const auto dim = static_cast<uint64_t>(t->info.dim);
  const uint64_t n = std::min(max_rows, rows - row_offset);
  partition_chunk c;
  c.key = key;
  c.version = t->info.version;
  c.row_offset = row_offset;
  c.total_rows = rows;
  c.embeddings = tensor::view({static_cast<int64_t>(n), static_cast<int64_t>(dim)}, t,
                              t->embeddings.values.data() + row_offset * dim, n * dim);
  c.optim_state = msg::state_rows(t, t->state.values.data(), row_offset, n, t->info.state_width);
  if (row_offset + n == rows) self->state.mapped.erase(key);
  return c;
}

caf::result<partition_chunk> disk_get(server_pointer self, const partition_key& key, uint64_t min_version,
                                      uint64_t row_offset, uint64_t max_rows) {
  auto& st = self->state;
  if (!st.disk) return bad(self, st.disk_error);
  const auto info = st.disk->find(table_key_of(key));
  if (!info) return bad(self, "unknown partition " + msg::to_string(key));
  if (info->version < min_version)
    return bad(self, fmt::format("partition {} is at version {}, older than the {} asked for", msg::to_string(key),
                                 info->version, min_version));
  if (row_offset > info->rows || max_rows == 0) return bad(self, "bad chunk request");
  if (auto it = st.mapped.find(key); it != st.mapped.end() && it->second->info.version == info->version)
    return chunk_of(self, key, it->second, row_offset, max_rows);
  auto promise = self->make_response_promise<partition_chunk>();
  st.jobs->post(
    caf::actor_cast<msg::partition_server_actor>(self),
    [disk = st.disk.get(), key](io_result& r) {
      auto t = disk->read(table_key_of(key));
      if (t) r.mapped = std::make_shared<const storage::mapped_table>(std::move(*t));
      else r.error = t.error().message;
    },
    [self, promise, key, min_version, row_offset, max_rows](io_result& r) mutable {
      if (!r.error.empty()) {
        promise.deliver(bad(self, r.error));
        return;
      }
      if (r.mapped->info.version < min_version || row_offset > r.mapped->info.rows) {
        promise.deliver(bad(self, fmt::format("partition {} changed to version {} while it was read",
                                              msg::to_string(key), r.mapped->info.version)));
        return;
      }
      self->state.mapped[key] = r.mapped;
      promise.deliver(chunk_of(self, key, r.mapped, row_offset, max_rows));
    });
  return promise;
}

// Where a validated chunk of a put stands, in either mode: its put (begun
// by a first chunk, which drops a half-done earlier one), and whether it is
// the first and the last chunk. `begin` readies a new put's sink, or says
// why it cannot; the modes differ only in where the rows go.
struct put_step {
  std::map<partition_key, pending_put>::iterator put;
  bool first = false, last = false;
};

caf::expected<put_step> next_put_step(server_pointer self, const partition_chunk& c, int64_t rows, int64_t dim,
                                      int64_t width, const std::function<caf::error()>& conflict,
                                      const std::function<std::optional<std::string>(pending_put&)>& begin) {
  auto& st = self->state;
  auto it = st.pending.find(c.key);
  const bool first = c.row_offset == 0;
  if (first) {
    if (it != st.pending.end()) st.pending.erase(it);
    if (auto fits = check_put(st.shapes.get(), c.key, c.total_rows, dim, width); !fits)
      return bad(self, fits.error().message);
    if (!base_matches(st, c.key, c.base_version)) return conflict();
    pending_put p;
    p.total_rows = c.total_rows;
    p.dim = dim;
    p.width = width;
    p.version = c.version;
    p.base_version = c.base_version;
    if (auto refused = begin(p)) return bad(self, *refused);
    it = st.pending.emplace(c.key, std::move(p)).first;
  } else if (it == st.pending.end()) {
    return bad(self, "chunk without a first chunk");
  }
  auto& p = it->second;
  if (p.total_rows != c.total_rows || p.dim != dim || p.width != width || p.next_row != c.row_offset ||
      (rows == 0 && p.total_rows > 0) ||
      p.version != c.version || p.base_version != c.base_version) {
    st.pending.erase(it);
    return bad(self, "chunk out of order");
  }
  p.next_row += static_cast<uint64_t>(rows);
  const bool last = p.next_row == p.total_rows;
  if (last && !base_matches(st, c.key, p.base_version)) {
    st.pending.erase(it);
    return conflict();
  }
  return put_step{it, first, last};
}

// A chunk of a put on disk, written by a job; the last one's job makes the
// table the new version. True once the table is complete.
caf::result<bool> disk_put(server_pointer self, const partition_chunk& c, int64_t rows, int64_t dim, int64_t width,
                           const std::function<caf::error()>& conflict) {
  auto& st = self->state;
  if (!st.disk) return bad(self, st.disk_error);
  auto step = next_put_step(self, c, rows, dim, width, conflict, [](pending_put& p) -> std::optional<std::string> {
    p.writer = std::make_shared<std::optional<storage::partition_store::put>>();  // its files with its first job
    return std::nullopt;
  });
  if (!step) return std::move(step.error());
  const bool first = step->first, last = step->last;
  auto writer = step->put->second.writer;
  if (last) st.pending.erase(step->put);
  auto promise = self->make_response_promise<bool>();
  st.jobs->post(
    caf::actor_cast<msg::partition_server_actor>(self),
    [disk = st.disk.get(), writer, c, first, last, dim, width](io_result& r) {
      if (first) {
        auto w = disk->begin(table_key_of(c.key), c.version, c.total_rows, dim, width);
        if (!w) {
          r.error = w.error().message;
          return;
        }
        writer->emplace(std::move(*w));
      }
      if (!writer->has_value()) {
        r.error = "an earlier chunk of this put could not be written";
        return;
      }
      if (auto ok = (*writer)->append(c.embeddings.values(), c.optim_state.values()); !ok) {
        r.error = ok.error().message;
        writer->reset();
        return;
      }
      if (!last) return;
      auto done = disk->install(std::move(**writer));
      writer->reset();
      if (!done) r.error = done.error().message;
    },
    [self, promise, key = c.key, writer, last](io_result& r) mutable {
      auto& s = self->state;
      if (!r.error.empty()) {
        if (auto pit = s.pending.find(key); pit != s.pending.end() && pit->second.writer == writer) s.pending.erase(pit);
        promise.deliver(bad(self, r.error));
        return;
      }
      if (last) s.mapped.erase(key);  // a mapping of the version replaced
      promise.deliver(last);
    });
  return promise;
}

msg::partition_server_actor::behavior_type partition_server(server_pointer self, std::string label, table_store store,
                                                            std::shared_ptr<const partition_shapes> shapes) {
  self->state.label = std::move(label);
  self->state.store = std::move(store);
  self->state.shapes = std::move(shapes);
  if (!self->state.store.disk_path.empty()) {
    auto disk = storage::partition_store::open(self->state.store.disk_path, self->state.store.dataset);
    if (disk) self->state.disk = std::move(*disk);
    else self->state.disk_error = disk.error().message;
  }
  self->state.jobs = std::make_unique<job_runner<io_result>>(std::string(to_string(role::partition_server)));
  return {
      [self](msg::get_atom, const partition_key& key, uint64_t min_version, uint64_t row_offset,
             uint64_t max_rows) -> caf::result<partition_chunk> {
        if (on_disk(self->state)) return disk_get(self, key, min_version, row_offset, max_rows);
        auto it = self->state.stored.find(key);
        if (it == self->state.stored.end()) return bad(self, "unknown partition " + msg::to_string(key));
        const auto& p = it->second;
        if (p.version < min_version)
          return bad(self, fmt::format("partition {} is at version {}, older than the {} asked for",
                                       msg::to_string(key), p.version, min_version));
        const auto rows = static_cast<uint64_t>(p.embeddings.shape[0]);
        const auto dim = static_cast<uint64_t>(p.embeddings.shape[1]);
        if (row_offset > rows || max_rows == 0) return bad(self, "bad chunk request");
        const uint64_t n = std::min(max_rows, rows - row_offset);
        partition_chunk c;
        c.key = key;
        c.version = p.version;
        c.row_offset = row_offset;
        c.total_rows = rows;
        if (row_offset == 0 && n == rows) {  // whole partition: share, no copy
          c.embeddings = p.embeddings;
          c.optim_state = p.optim_state;
          return c;
        }
        // Views of the stored rows: nobody modifies a sent tensor.
        c.embeddings = tensor::view({static_cast<int64_t>(n), static_cast<int64_t>(dim)}, p.embeddings.data,
                                    p.embeddings.data.get() + row_offset * dim, n * dim);
        c.optim_state = msg::state_rows(p.optim_state.data, p.optim_state.data.get(), row_offset, n,
                                        msg::state_width_of(p.optim_state));
        return c;
      },
      [self](msg::put_atom, const partition_chunk& c) -> caf::result<bool> {
        auto& st = self->state;
        // Validate the chunk completely before touching any state.
        // Optimizer state: [rows] (row-wise Adagrad) or [rows, dim] (element-wise).
        if (c.embeddings.shape.size() != 2 || c.optim_state.shape.empty() || c.optim_state.shape.size() > 2)
          return bad(self, "bad chunk shapes");
        const int64_t rows = c.embeddings.shape[0];
        const int64_t dim = c.embeddings.shape[1];
        const int64_t width = msg::state_width_of(c.optim_state);
        if (rows < 0 || dim < 0 || c.optim_state.shape[0] != rows || (width != 1 && width != dim))
          return bad(self, "chunk shapes disagree");
        if (dim > kMaxDim) return bad(self, fmt::format("a chunk of dimension {} (at most {})", dim, kMaxDim));
        if (c.embeddings.numel() != static_cast<uint64_t>(rows) * static_cast<uint64_t>(dim) ||
            c.optim_state.numel() != static_cast<uint64_t>(rows) * static_cast<uint64_t>(width))
          return bad(self, "chunk data does not match its shape");
        if (c.total_rows > kMaxRows || c.row_offset > c.total_rows ||
            static_cast<uint64_t>(rows) > c.total_rows - c.row_offset)
          return bad(self, "chunk rows out of range");
        std::function<caf::error()> conflict = [&] {
          auto stored = stored_version(st, c.key);
          return bad(self, fmt::format("put of {} version {} started from version {}, but version {} is stored",
                                       msg::to_string(c.key), c.version, c.base_version,
                                       stored ? std::to_string(*stored) : std::string("none")));
        };
        if (on_disk(st)) return disk_put(self, c, rows, dim, width, conflict);
        const bool whole = c.row_offset == 0 && c.total_rows == static_cast<uint64_t>(rows);
        auto step = next_put_step(self, c, rows, dim, width, conflict, [&](pending_put& p) -> std::optional<std::string> {
          if (whole) return std::nullopt;  // shared below, no copy
          // one allocation for the whole partition, once the claimed size is known to fit
          if (auto fits = storage::check_allocation(fmt::format("a put of partition {}", msg::to_string(c.key)),
                                                    c.total_rows * static_cast<uint64_t>(dim + width) * sizeof(float));
              !fits)
            return fits.error().message;
          try {
            p.embeddings.reserve(c.total_rows * static_cast<uint64_t>(dim));
            p.optim_state.reserve(c.total_rows * static_cast<uint64_t>(width));
          } catch (const std::exception&) {
            return fmt::format("a put of partition {}: cannot allocate {} rows of {}", msg::to_string(c.key),
                               c.total_rows, dim);
          }
          return std::nullopt;
        });
        if (!step) return std::move(step.error());
        auto& p = step->put->second;
        if (whole) {
          st.stored[c.key] = {c.embeddings, c.optim_state, c.version};
        } else {
          p.embeddings.insert(p.embeddings.end(), c.embeddings.values().begin(), c.embeddings.values().end());
          p.optim_state.insert(p.optim_state.end(), c.optim_state.values().begin(), c.optim_state.values().end());
          if (!step->last) return false;
          const auto total = static_cast<int64_t>(p.total_rows);
          st.stored[c.key] = {tensor::make({total, p.dim}, std::move(p.embeddings)),
                              tensor::make(msg::state_shape(p.total_rows, p.width), std::move(p.optim_state)),
                              p.version};
        }
        st.pending.erase(step->put);
        return true;
      },
      [self](msg::abort_atom, const partition_key& key, uint64_t version) {
        // On disk the put's files go with the last reference to its writer:
        // this one, or that of a chunk's job still queued.
        auto& st = self->state;
        auto it = st.pending.find(key);
        if (it == st.pending.end() || it->second.version != version) return false;
        st.pending.erase(it);
        return true;
      },
      [self](msg::list_atom) -> std::vector<msg::partition_info> {
        std::vector<msg::partition_info> out;
        if (self->state.disk)
          for (const auto& [key, t] : self->state.disk->list())
            out.push_back({{key.first, key.second}, t.version, t.rows, t.dim, t.state_width});
        for (const auto& [key, p] : self->state.stored)
          out.push_back({key, p.version, static_cast<uint64_t>(p.embeddings.shape[0]), p.embeddings.shape[1],
                         msg::state_width_of(p.optim_state)});
        return out;
      },
      [self](msg::clear_atom) -> caf::result<bool> {
        auto& st = self->state;
        st.stored.clear();
        st.pending.clear();
        st.mapped.clear();
        if (!st.disk) return true;
        // After the jobs queued before it, so no put of before the clear lands after it.
        auto promise = self->make_response_promise<bool>();
        post_io(self, promise, [disk = st.disk.get()](io_result&) { disk->clear(); });
        return promise;
      },
      [self](msg::save_atom, const msg::table_save& job) { return save(self, job); },
      [self](msg::restore_atom, const msg::table_restore& job) -> caf::result<bool> {
        auto& st = self->state;
        if (job.target.size() > 1 || (job.target.size() == 1 && !job.target.front()))
          return bad(self, fmt::format("a restore of {} names {} targets: at most one server to restore into",
                                       msg::to_string(job.key), job.target.size()));
        auto promise = self->make_response_promise<bool>();
        auto* sys = &self->system();
        // Into itself on disk: on this job thread, as a put would be (a put
        // sent to itself would wait behind this very job).
        if (job.target.empty() && on_disk(st)) {
          if (!st.disk) return bad(self, st.disk_error);
          post_io(self, promise, [store = st.store, job, disk = st.disk.get()](io_result& r) {
            if (auto adopted = adopt_table(store, job.key, job.version, job.files, *disk); !adopted)
              r.error = adopted.error().message;
          });
          return promise;
        }
        post_io(self, promise, [sys, store = st.store, job, me = caf::actor_cast<caf::actor>(self)](io_result& r) {
          auto table = read_table(store, job.files);
          if (!table) {
            r.error = table.error().message;
            return;
          }
          partition_server_ref target{caf::actor_cast<msg::partition_server_actor>(job.target.empty() ? me : job.target.front()),
                                      job.target_bulk};
          if (auto ok = store_table(*sys, target, job.key, *table, job.version, msg::any_version,
                                    store.limits.request, nullptr, traffic::kind::checkpoints);
              !ok)
            r.error = ok.error().message;
        });
        return promise;
      },
      [self](msg::prune_atom, const std::vector<std::string>& keep) -> caf::result<bool> {
        if (self->state.store.checkpoint_path.empty()) return bad(self, "no checkpoint path to prune");
        auto promise = self->make_response_promise<bool>();
        post_io(self, promise, [root = self->state.store.checkpoint_path, keep](io_result&) {
          storage::prune_table_files(root, std::set<std::string>(keep.begin(), keep.end()));
        });
        return promise;
      },
      [self](msg::job_done_atom, uint64_t token) { self->state.jobs->done(token); },
  };
}

}  // namespace

msg::partition_server_actor spawn_partition_server(caf::actor_system& sys, std::string label, table_store store,
                                                  std::shared_ptr<const partition_shapes> shapes) {
  return sys.spawn(partition_server, std::move(label), std::move(store), std::move(shapes));
}

}  // namespace abg::actors
