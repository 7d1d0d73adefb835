// What this process sends to and receives from other processes, by purpose
// (docs/cluster.md, "Traffic"): partition swaps and checkpoint streaming as
// the bulk channel writes and reads them, parameter sharing as a
// param_sharer exchanges values with a shard in another process, and
// control (every other message on CAF's connections: joins, locks, stats,
// data at join) as what those connections carried minus the parameters.
// Messages as well as bytes: the bulk channel's and BASP's, each counted
// where it is framed.
// Transfers inside one process are not traffic and are not counted.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "messages/bulk_wire.h"

namespace abg::actors::traffic {

enum class kind : std::uint8_t { swaps = 0, checkpoints = 1, parameters = 2, control = 3 };
inline constexpr std::size_t kinds = 4;

/// Adds to the process's counters (swaps, checkpoints, parameters): bytes,
/// and the messages that carried them.
void count(kind k, std::uint64_t sent, std::uint64_t received, std::uint64_t messages_sent,
           std::uint64_t messages_received);
/// Bytes of the partitions that trainers swapped with other processes, as
/// the schedule implies them (rows x (dimension + state width) floats each way).
void count_implied_swaps(std::uint64_t bytes);

/// Adds a bulk channel's bytes and messages to those of the peer at the other end of `fd`.
void count_peer(int fd, std::uint64_t sent, std::uint64_t received, std::uint64_t messages_sent,
                std::uint64_t messages_received);

/// BASP messages on one of CAF's connections, to `peer` ("ip:port", as
/// peer_of names it), as secure_remoting's scribes see them pass.
void count_caf_messages(const std::string& peer, std::uint64_t sent, std::uint64_t received);

/// "ip:port" of the other end of a TCP socket, or empty.
std::string peer_of(int fd);
/// "ip:port" of a TCP socket's own end, or empty.
std::string local_of(int fd);

/// A bulk channel's socket, open from `open` to `close`: not one of CAF's connections.
void bulk_socket_open(int fd);
void bulk_socket_closed(int fd);

/// A bulk channel's bytes, counted as traffic of `purpose` when the meter
/// ends (declare it after the channel: before the channel closes its
/// socket); a server learns the purpose from the request, on the way.
class bulk_meter {
public:
  bulk_meter(const msg::bulk::channel& ch, kind purpose) : ch_(ch), purpose_(purpose) { bulk_socket_open(ch.fd()); }
  bulk_meter(const bulk_meter&) = delete;
  bulk_meter& operator=(const bulk_meter&) = delete;
  ~bulk_meter() {
    count(purpose_, ch_.bytes_sent(), ch_.bytes_received(), ch_.messages_sent(), ch_.messages_received());
    count_peer(ch_.fd(), ch_.bytes_sent(), ch_.bytes_received(), ch_.messages_sent(), ch_.messages_received());
    bulk_socket_closed(ch_.fd());
  }
  void purpose(kind k) { purpose_ = k; }

private:
  const msg::bulk::channel& ch_;
  kind purpose_;
};

/// Bytes exchanged with one TCP peer, "ip:port" as the kernel names the
/// other end (CAF's connections and bulk channels alike): per node pair,
/// once the coordinator knows which node listens there.
struct peer_bytes {
  std::string peer;
  std::uint64_t sent = 0, received = 0;
  std::uint64_t messages_sent = 0, messages_received = 0;
};

struct report {
  std::array<std::uint64_t, kinds> sent{}, received{};
  // Messages: bulk channels' by purpose; control is BASP's less the parameters'.
  std::array<std::uint64_t, kinds> messages_sent{}, messages_received{};
  std::uint64_t implied_swaps = 0;
  std::vector<peer_bytes> peers;
  std::uint64_t total_sent() const;
  std::uint64_t total_received() const;
};

/// Reads the kernel's count of bytes acknowledged and received on every TCP
/// socket of this process that is not a bulk channel's (CAF's connections
/// to the other nodes), keeping the last count of each so that one closed
/// later is still counted: a node calls this every so often.
void sample();

/// The counters, with control from CAF's connections (sampled now, closed
/// ones as last sampled) less the parameters.
report measure();

/// One line: "sent X MB (swaps A, checkpoints B, parameters C, control D), received ...".
std::string describe(const report& r);

} // namespace abg::actors::traffic
