#include "actors/traffic.h"

#include <atomic>
#include <cstddef>
#include <filesystem>
#include <map>
#include <mutex>
#include <set>
#include <string_view>

#include <linux/tcp.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <fmt/format.h>

namespace abg::actors::traffic {

namespace {

struct byte_counts {
  std::uint64_t sent = 0, received = 0;
};

struct socket_seen {
  byte_counts bytes;
  std::string peer;
};

struct counters {
  std::array<std::atomic<std::uint64_t>, kinds> sent{}, received{};
  std::array<std::atomic<std::uint64_t>, kinds> messages_sent{}, messages_received{};
  std::atomic<std::uint64_t> implied_swaps{0};
  std::mutex mutex;
  std::set<int> bulk;                           // guarded by mutex
  std::map<std::string, socket_seen> sockets;   // CAF's, by "socket:[inode]" at the last sample; guarded by mutex
  byte_counts closed;                           // of those sampled once and closed since; guarded by mutex
  std::map<std::string, byte_counts> gone_by_peer; // those, and ended bulk channels, by peer; guarded by mutex
  std::map<std::string, byte_counts> messages_by_peer; // BASP's and bulk channels' messages; guarded by mutex
  std::atomic<std::uint64_t> caf_messages_sent{0}, caf_messages_received{0};
};

counters& the() {
  static counters c;
  return c;
}

} // namespace

namespace {

// "ip:port" of a socket address, or empty.
std::string address_text(const sockaddr_storage& a) {
  char host[INET6_ADDRSTRLEN] = {};
  if (a.ss_family == AF_INET) {
    const auto* v4 = reinterpret_cast<const sockaddr_in*>(&a);
    ::inet_ntop(AF_INET, &v4->sin_addr, host, sizeof host);
    return fmt::format("{}:{}", host, ntohs(v4->sin_port));
  }
  if (a.ss_family == AF_INET6) {
    const auto* v6 = reinterpret_cast<const sockaddr_in6*>(&a);
    ::inet_ntop(AF_INET6, &v6->sin6_addr, host, sizeof host);
    return fmt::format("[{}]:{}", host, ntohs(v6->sin6_port));
  }
  return {};
}

} // namespace

std::string peer_of(int fd) {
  sockaddr_storage a{};
  socklen_t len = sizeof a;
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) return {};
  return address_text(a);
}

std::string local_of(int fd) {
  sockaddr_storage a{};
  socklen_t len = sizeof a;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) return {};
  return address_text(a);
}

namespace {

void add(byte_counts& to, const byte_counts& b) {
  to.sent += b.sent;
  to.received += b.received;
}

} // namespace

void count_peer(int fd, std::uint64_t sent, std::uint64_t received, std::uint64_t messages_sent,
                std::uint64_t messages_received) {
  auto peer = peer_of(fd);
  std::lock_guard lock(the().mutex);
  add(the().gone_by_peer[peer], {sent, received});
  add(the().messages_by_peer[peer], {messages_sent, messages_received});
}

void count_caf_messages(const std::string& peer, std::uint64_t sent, std::uint64_t received) {
  auto& c = the();
  c.caf_messages_sent += sent;
  c.caf_messages_received += received;
  std::lock_guard lock(c.mutex);
  add(c.messages_by_peer[peer], {sent, received});
}

void count(kind k, std::uint64_t sent, std::uint64_t received, std::uint64_t messages_sent,
           std::uint64_t messages_received) {
  auto& c = the();
  c.sent[static_cast<std::size_t>(k)] += sent;
  c.received[static_cast<std::size_t>(k)] += received;
  c.messages_sent[static_cast<std::size_t>(k)] += messages_sent;
  c.messages_received[static_cast<std::size_t>(k)] += messages_received;
}

void count_implied_swaps(std::uint64_t bytes) { the().implied_swaps += bytes; }

void bulk_socket_open(int fd) {
  std::lock_guard lock(the().mutex);
  the().bulk.insert(fd);
}

void bulk_socket_closed(int fd) {
  std::lock_guard lock(the().mutex);
  the().bulk.erase(fd);
}

std::uint64_t report::total_sent() const {
  std::uint64_t n = 0;
  for (auto b : sent) n += b;
  return n;
}

std::uint64_t report::total_received() const {
  std::uint64_t n = 0;
  for (auto b : received) n += b;
  return n;
}

void sample() {
  auto& c = the();
  std::set<int> bulk;
  {
    std::lock_guard lock(c.mutex);
    bulk = c.bulk;
  }
  // CAF's connections: every TCP socket of this process but the bulk channels'.
  std::map<std::string, socket_seen> now;
  std::error_code ec;
  for (auto& entry : std::filesystem::directory_iterator("/proc/self/fd", ec)) {
    int fd = -1;
    try {
      fd = std::stoi(entry.path().filename().string());
    } catch (...) {
      continue;
    }
    if (bulk.count(fd)) continue;
    auto target = std::filesystem::read_symlink(entry.path(), ec);
    if (ec || !target.string().starts_with("socket:")) continue;
    tcp_info info{};
    socklen_t len = sizeof info;
    // Not TCP, or a kernel whose tcp_info has no byte counts (before 4.2).
    if (::getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &len) != 0 ||
        len < offsetof(tcp_info, tcpi_bytes_received) + sizeof info.tcpi_bytes_received)
      continue;
    auto& seen = now[target.string()];
    seen.bytes = {info.tcpi_bytes_acked, info.tcpi_bytes_received};
    seen.peer = peer_of(fd);
  }
  std::lock_guard lock(c.mutex);
  for (auto& [name, s] : c.sockets)
    if (!now.contains(name)) {
      add(c.closed, s.bytes);
      add(c.gone_by_peer[s.peer], s.bytes);
    }
  c.sockets = std::move(now);
}

report measure() {
  auto& c = the();
  sample();
  report r;
  for (std::size_t k = 0; k < kinds; ++k) {
    r.sent[k] = c.sent[k].load();
    r.received[k] = c.received[k].load();
    r.messages_sent[k] = c.messages_sent[k].load();
    r.messages_received[k] = c.messages_received[k].load();
  }
  r.implied_swaps = c.implied_swaps.load();
  std::uint64_t sent = 0, received = 0;
  {
    std::lock_guard lock(c.mutex);
    sent = c.closed.sent;
    received = c.closed.received;
    auto by_peer = c.gone_by_peer;
    for (auto& [name, s] : c.sockets) {
      sent += s.bytes.sent;
      received += s.bytes.received;
      add(by_peer[s.peer], s.bytes);
    }
    for (auto& [peer, m] : c.messages_by_peer) by_peer[peer]; // a peer with messages counted, its bytes not (yet)
    for (auto& [peer, b] : by_peer) {
      if (peer.empty()) continue;
      const auto m = c.messages_by_peer.contains(peer) ? c.messages_by_peer.at(peer) : byte_counts{};
      r.peers.push_back({peer, b.sent, b.received, m.sent, m.received});
    }
  }
  const auto params = static_cast<std::size_t>(kind::parameters), control = static_cast<std::size_t>(kind::control);
  auto less = [](std::uint64_t all, std::uint64_t part) { return all > part ? all - part : 0; };
  r.sent[control] = less(sent, r.sent[params]);
  r.received[control] = less(received, r.received[params]);
  r.messages_sent[control] = less(c.caf_messages_sent.load(), r.messages_sent[params]);
  r.messages_received[control] = less(c.caf_messages_received.load(), r.messages_received[params]);
  return r;
}

std::string describe(const report& r) {
  auto mb = [](std::uint64_t b) { return static_cast<double>(b) / 1e6; };
  auto side = [&](const std::array<std::uint64_t, kinds>& b, std::uint64_t total) {
    return fmt::format("{:.3f} MB (swaps {:.3f}, checkpoints {:.3f}, parameters {:.3f}, control {:.3f})", mb(total),
                       mb(b[0]), mb(b[1]), mb(b[2]), mb(b[3]));
  };
  return fmt::format("sent {}, received {}; the schedule implies {:.3f} MB of swaps", side(r.sent, r.total_sent()),
                     side(r.received, r.total_received()), mb(r.implied_swaps));
}

} // namespace abg::actors::traffic
