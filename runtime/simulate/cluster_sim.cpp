#include "runtime/simulate/cluster_sim.h"

#include <algorithm>
#include <deque>
#include <map>
#include <queue>
#include <stdexcept>
#include <string>

#include "runtime/schedule/serve_parked.h"

namespace abg::simulate {

namespace {

using schedule::bucket;
using schedule::part_key;
using schedule::part_version;

struct event {
  enum class kind : std::uint8_t { acquire, unlock, release };
  double time = 0;
  std::uint64_t seq = 0; // ties in the order scheduled: the run is deterministic
  kind what = kind::acquire;
  std::uint32_t trainer = 0;
  bucket trained{};
  std::vector<part_version> written;
  bool operator>(const event& o) const { return time != o.time ? time > o.time : seq > o.seq; }
};

class epoch_run {
public:
  epoch_run(const graph_model& g, const cluster_model& c, std::int32_t epoch, std::vector<lock_call>* calls)
      : g_(g), c_(c), m_(static_cast<std::size_t>(c.machines)), sched_(config(g, c)), calls_(calls), out_machines_(m_),
        send_free_(m_, 0), receive_free_(m_, 0), disk_free_(m_, 0), ahead_(m_), held_bytes_(m_, 0),
        kernel_end_(m_, -1), io_done_(m_, 0), parked_on_write_(m_, -1) {
    sched_.start_epoch(epoch);
  }

  epoch_figures run() {
    for (std::uint32_t t = 0; t < m_; ++t) push({0, 0, event::kind::acquire, t, {}, {}});
    while (!queue_.empty() && !sched_.epoch_done()) {
      auto e = queue_.top();
      queue_.pop();
      now_ = e.time;
      switch (e.what) {
      case event::kind::acquire:
        record({lock_call::kind::acquire, e.trainer});
        if (!acquire(e.trainer)) park(e.trainer);
        break;
      case event::kind::unlock:
        record({lock_call::kind::unlock, e.trainer, e.written});
        if (!sched_.unlock(e.trainer, e.written)) throw std::logic_error("simulated unlock refused");
        // As the lock server: the parked trainers first; the trainers
        // training ask for what was handed to them after.
        serve_parked();
        read_handed();
        break;
      case event::kind::release:
        record({lock_call::kind::release, e.trainer, {}, e.trained});
        if (!sched_.release(e.trainer, e.trained)) throw std::logic_error("simulated release refused");
        --running_;
        serve_parked();
        push({now_, 0, event::kind::acquire, e.trainer, {}, {}});
        break;
      }
    }
    if (!sched_.epoch_done()) throw std::logic_error("simulated epoch stalled: no trainer can go on");
    for (auto t : parked_) unpark(t);
    out_.training_seconds = now_;
    out_.commit_seconds = commit(now_) - now_;
    out_.seconds = out_.training_seconds + out_.commit_seconds;
    for (std::size_t m = 0; m < m_; ++m) {
      auto& f = out_machines_[m];
      f.idle_fraction = out_.seconds > 0 ? 1.0 - f.kernel_seconds / out_.seconds : 0.0;
      // With a buffer the server's partitions are on disk: the trainer's buffer is what stays in memory.
      f.memory_bytes += (on_disk() ? 0 : server_bytes(m)) + g_.shared_bytes;
    }
    out_.machines = std::move(out_machines_);
    return std::move(out_);
  }

private:
  static schedule::scheduler_config config(const graph_model& g, const cluster_model& c) {
    if (c.machines < 1 || c.edges_per_second <= 0 || c.bandwidth <= 0 || c.latency < 0 || c.disk_bandwidth <= 0 ||
        c.host_cores < 0)
      throw std::invalid_argument("cluster model: machines, edges/s, bandwidth and disk bandwidth must be positive");
    auto sc = g.schedule;
    if (g.bucket_edges.size() != static_cast<std::size_t>(sc.nparts_lhs) * static_cast<std::size_t>(sc.nparts_rhs) ||
        g.partition_bytes[0].size() != static_cast<std::size_t>(sc.nparts_lhs) ||
        (!sc.shared_partitions && g.partition_bytes[1].size() != static_cast<std::size_t>(sc.nparts_rhs)))
      throw std::invalid_argument("graph model: bucket and partition sizes do not match the grid");
    sc.num_trainers = c.machines;
    return sc;
  }

  void record(lock_call c) {
    if (calls_) calls_->push_back(std::move(c));
  }

  void push(event e) {
    e.seq = next_seq_++;
    queue_.push(std::move(e));
  }

  // Partitions just handed to reservations that awaited them (grant::awaited):
  // a trainer whose kernel still runs reads them ahead beside it, as its
  // I/O thread does (its polling taken as instant); later ones its next
  // grant fetches.
  void read_handed() {
    for (std::uint32_t t = 0; t < m_; ++t) {
      if (kernel_end_[t] <= now_) continue;
      auto handed = sched_.take_handed(t);
      if (calls_) calls_->push_back({lock_call::kind::handed, t, {}, {}, {}, handed});
      for (const auto& h : handed) {
        io_done_[t] = load(t, h.key, std::max(now_, io_done_[t]));
        ahead_[t][h.key] = {h.version, io_done_[t]};
        auto& f = out_machines_[t];
        std::uint64_t read = 0;
        for (const auto& [k, copy] : ahead_[t]) read += bytes_of(k);
        f.memory_bytes = std::max(f.memory_bytes, held_bytes_[t] + read);
      }
    }
  }

  // As the lock server does after an unlock or a release.
  void serve_parked() {
    schedule::serve_parked(
      sched_, parked_, [](std::uint32_t t) { return t; },
      [&](std::uint32_t t) {
        if (!acquire(t)) return false;
        unpark(t);
        return true;
      });
  }

  // A trainer told to wait while its own write-back runs waits for I/O.
  void park(std::uint32_t t) {
    parked_.push_back(t);
    parked_on_write_[t] = sched_.writes_back(t) ? now_ : -1;
  }
  void unpark(std::uint32_t t) {
    if (parked_on_write_[t] >= 0) out_machines_[t].waited_seconds += now_ - parked_on_write_[t];
    parked_on_write_[t] = -1;
  }

  std::uint64_t bytes_of(part_key k) const {
    return g_.partition_bytes[g_.schedule.shared_partitions ? 0 : k.side][static_cast<std::size_t>(k.part)];
  }
  std::size_t server_of(part_key k) const { return static_cast<std::size_t>(k.part) % m_; }

  std::uint64_t server_bytes(std::size_t m) const {
    std::uint64_t out = 0;
    for (int side = 0; side < (g_.schedule.shared_partitions ? 1 : 2); ++side)
      for (std::size_t p = m; p < g_.partition_bytes[side].size(); p += m_) out += g_.partition_bytes[side][p];
    return out;
  }

  // Bytes from machine `from` to `to`, starting no earlier than `at`; when
  // it has arrived. On one machine: a message in memory, no time.
  double transfer(std::size_t from, std::size_t to, std::uint64_t bytes, double at) {
    if (from == to || bytes == 0) return at;
    const double start = std::max({at, send_free_[from], receive_free_[to]});
    const double end = start + c_.latency + static_cast<double>(bytes) / c_.bandwidth;
    send_free_[from] = receive_free_[to] = end;
    out_machines_[from].bytes_sent += bytes;
    out_machines_[to].bytes_received += bytes;
    return end;
  }

  bool on_disk() const { return g_.schedule.buffer_capacity > 0; }

  // Bytes read from or written to machine m's disk, starting no earlier than `at`; when done.
  double disk_io(std::size_t m, std::uint64_t bytes, double at) {
    const double start = std::max(at, disk_free_[m]);
    disk_free_[m] = start + static_cast<double>(bytes) / c_.disk_bandwidth;
    return disk_free_[m];
  }

  // Partition k from its server to trainer t: read from the server's disk
  // with a buffer, then across; when it has arrived.
  double load(std::uint32_t t, part_key k, double at) {
    if (on_disk()) at = disk_io(server_of(k), bytes_of(k), at);
    out_.swap_bytes += bytes_of(k);
    return transfer(server_of(k), t, bytes_of(k), at);
  }

  // The trainer writes back and unlocks what the grant drops; returns when.
  double write_back(std::uint32_t t, const std::vector<part_key>& drop, double at) {
    std::vector<part_version> written;
    for (auto k : drop) {
      at = transfer(t, server_of(k), bytes_of(k), at);
      if (on_disk()) at = disk_io(server_of(k), bytes_of(k), at);
      out_.swap_bytes += bytes_of(k);
      held_bytes_[t] -= std::min(held_bytes_[t], bytes_of(k));
      written.push_back({k, sched_.version(k) + 1});
    }
    if (!written.empty()) push({at, 0, event::kind::unlock, t, {}, std::move(written)});
    return at;
  }

  // False: told to wait (the caller parks the trainer).
  bool acquire(std::uint32_t t) {
    // The lock server is on machine 0: a round trip from any other.
    const double asked = now_ + (t == 0 ? 0.0 : 2 * c_.latency);
    auto g = sched_.acquire(t);
    if (calls_ && g.what != schedule::grant::kind::wait) calls_->back().grants.emplace_back(t, g);
    switch (g.what) {
    case schedule::grant::kind::wait: return false;
    case schedule::grant::kind::drop: {
      // After the I/O still running, as the trainer's drop job joins it first.
      const double done = write_back(t, g.drop, std::max(asked, io_done_[t]));
      io_done_[t] = done;
      out_machines_[t].waited_seconds += done - asked;
      // Asks again once the unlock is in (after it in the queue).
      push({done, 0, event::kind::acquire, t, {}, {}});
      return true;
    }
    case schedule::grant::kind::bucket: break;
    }
    out_.sequence.emplace_back(t, g.assigned);
    auto& f = out_machines_[t];
    auto& ahead = ahead_[t];
    // Copies read ahead that this grant does not take leave the slot.
    std::erase_if(ahead, [&](const auto& entry) {
      return std::none_of(g.fetch.begin(), g.fetch.end(), [&](const auto& v) { return v.key == entry.first; });
    });
    auto read_ahead = [&](const part_version& v) {
      auto it = ahead.find(v.key);
      return it != ahead.end() && it->second.version >= v.version;
    };
    const auto used = static_cast<std::size_t>(std::count_if(g.fetch.begin(), g.fetch.end(), read_ahead));
    const bool beside = g_.schedule.buffer_capacity == 0 || used == g.fetch.size();
    // The I/O of the buckets before may still run: a bucket that fetches
    // waits for its end, one that fetches nothing starts at once.
    double at = g.fetch.empty() ? asked : std::max(asked, io_done_[t]);
    if (!beside) at = write_back(t, g.drop, at);
    for (auto& v : g.fetch) {
      if (read_ahead(v)) {
        at = std::max(at, ahead.at(v.key).ready);
        ahead.erase(v.key);
        ++f.read_ahead;
      } else {
        at = load(t, v.key, at);
      }
      held_bytes_[t] += bytes_of(v.key);
      ++f.loads;
    }
    f.waited_seconds += at - asked;
    f.memory_bytes = std::max(f.memory_bytes, held_bytes_[t]);
    const auto edges = g_.bucket_edges[static_cast<std::size_t>(g.assigned.lhs) * static_cast<std::size_t>(g_.schedule.nparts_rhs) +
                                       static_cast<std::size_t>(g.assigned.rhs)];
    ++running_;
    const double share = c_.host_cores > 0 ? std::min(1.0, static_cast<double>(c_.host_cores) / running_) : 1.0;
    const double kernel = static_cast<double>(edges) / (c_.edges_per_second * share);
    // Parameter sharing beside the kernel: the shared parameters to the
    // other machines' shards and back.
    if (m_ > 1 && g_.shared_bytes > 0) {
      const auto slice = g_.shared_bytes / m_;
      for (std::size_t s = 0; s < m_; ++s) {
        transfer(t, s, slice, at);
        transfer(s, t, slice, at);
      }
    }
    f.kernel_seconds += kernel;
    ++f.buckets;
    // Beside the kernel and the ones after, behind the I/O still running:
    // the write-back, then the next bucket's partitions into the slot.
    double io = std::max(at, io_done_[t]);
    if (beside) io = write_back(t, g.drop, io);
    std::uint64_t read_bytes = 0; // several trainers read a reserved bucket's partitions ahead
    for (auto& a : g.ahead) {
      io = load(t, a.key, io);
      ahead[a.key] = {a.version, io};
      read_bytes += bytes_of(a.key);
      f.memory_bytes = std::max(f.memory_bytes, held_bytes_[t] + read_bytes);
    }
    kernel_end_[t] = at + kernel;
    io_done_[t] = io;
    push({at + kernel, 0, event::kind::release, t, g.assigned, {}});
    return true;
  }

  // The commit after the epoch: gathered to machine 0 one partition at a
  // time, or written by every server at once (local checkpoints). A server
  // that writes its own partitions (local, or machine 0's when gathered)
  // links those it keeps on disk: their bytes are already there.
  double commit(double at) {
    double end = at;
    for (int side = 0; side < (g_.schedule.shared_partitions ? 1 : 2); ++side) {
      for (std::size_t p = 0; p < g_.partition_bytes[side].size(); ++p) {
        const auto bytes = g_.partition_bytes[side][p];
        if (c_.local_checkpoints || (p % m_ == 0 && on_disk())) continue;
        at = transfer(p % m_, 0, bytes, at) + static_cast<double>(bytes) / c_.disk_bandwidth;
        end = at;
      }
    }
    if (c_.local_checkpoints && !on_disk())
      for (std::size_t m = 0; m < m_; ++m)
        end = std::max(end, at + static_cast<double>(server_bytes(m)) / c_.disk_bandwidth);
    return end + static_cast<double>(g_.shared_bytes) / c_.disk_bandwidth;
  }

  const graph_model& g_;
  const cluster_model& c_;
  std::size_t m_;
  schedule::bucket_scheduler sched_;
  std::vector<lock_call>* calls_; // null: not recorded
  epoch_figures out_;
  std::vector<machine_figures> out_machines_;
  std::vector<double> send_free_, receive_free_, disk_free_;
  // Per trainer: partitions read ahead, at the version read, ready when.
  struct ahead_copy {
    std::uint64_t version = 0;
    double ready = 0;
  };
  std::vector<std::map<part_key, ahead_copy>> ahead_;
  std::deque<std::uint32_t> parked_;
  std::vector<std::uint64_t> held_bytes_;
  std::vector<double> kernel_end_, io_done_; // per trainer: its kernel's end, its I/O's
  std::vector<double> parked_on_write_; // per trainer: since when parked for its write-back, else -1
  std::priority_queue<event, std::vector<event>, std::greater<>> queue_;
  std::uint64_t next_seq_ = 0;
  std::int32_t running_ = 0; // kernels in progress
  double now_ = 0;
};

} // namespace

epoch_figures simulate_epoch(const graph_model& graph, const cluster_model& cluster, std::int32_t epoch,
                             std::vector<lock_call>* calls) {
  return epoch_run(graph, cluster, epoch, calls).run();
}

} // namespace abg::simulate
