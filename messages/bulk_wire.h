// The bulk channel of a partition server (messages/bulk.capnp): requests,
// replies and a partition's elements over a TCP connection of their own,
// so that the elements go from one table's memory to the socket and from the
// socket into the other table's memory without a copy. Every message is
// validated before use and every size checked against limits before any
// memory is taken. Each wait on the socket gives up after `idle` without
// progress, or when `*stop` is set; such failures are marked lost_peer.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "abg/error.h"
#include "messages/handshake.h"
#include "messages/tls.h"

namespace abg::msg::bulk {

/// Limits a receiver enforces before allocating.
inline constexpr std::uint64_t max_rows = std::uint64_t{1} << 34;
inline constexpr std::int64_t max_dim = std::int64_t{1} << 20;
inline constexpr std::uint64_t max_elements = std::uint64_t{1} << 36;
inline constexpr std::size_t max_message_bytes = 64 * 1024;
inline constexpr std::size_t max_entity_bytes = 1024;
/// Elements per chunk (8 MiB).
inline constexpr std::uint64_t chunk_elements = std::uint64_t{1} << 21;
/// BulkRequest.baseVersion meaning "whatever is stored".
inline constexpr std::uint64_t any_version = ~std::uint64_t{0};

/// The rows of a put: `width` optimizer values per row (1 or dim).
struct rows_layout {
  std::uint64_t rows = 0;
  std::int64_t dim = 0;
  std::int64_t width = 1;
  /// Rows per block of a put (messages/bulk.capnp): as many as one chunk
  /// holds, so that a receiver can store each block before the next.
  std::uint64_t block_rows() const {
    const auto per_row = static_cast<std::uint64_t>(dim + width);
    return per_row == 0 ? chunk_elements : std::max<std::uint64_t>(1, chunk_elements / per_row);
  }
};

struct request {
  enum class op : std::uint8_t { get, put };
  op what = op::get;
  std::string entity;
  std::int32_t part = 0;
  std::uint64_t version = 0;
  std::uint64_t base_version = any_version;
  std::uint64_t rows = 0;
  std::int64_t dim = 0;
  std::uint8_t purpose = 0; // 0: a trainer's swap, 1: a checkpoint (gathered or seeded)
  bool elementwise_state = false; // put: optimizer state [rows, dim], not [rows]
  std::uint64_t state_count() const { return elementwise_state ? rows * static_cast<std::uint64_t>(dim) : rows; }
};

struct reply {
  bool ok = false;
  std::string error;
  std::uint64_t version = 0;
  std::uint64_t rows = 0;
  std::int64_t dim = 0;
  bool elementwise_state = false; // get: as in request
  std::uint64_t state_count() const { return elementwise_state ? rows * static_cast<std::uint64_t>(dim) : rows; }
};

/// One connected TCP socket (closed by the destructor).
class channel {
public:
  /// Over TLS when `s` holds a session (read ahead: a channel reads its
  /// records in large reads, and asks the session before the socket).
  explicit channel(int fd, tls::session s = {}) : fd_(fd), tls_(std::move(s)) {
    if (tls_) SSL_set_read_ahead(tls_.get(), 1);
  }
  channel(channel&& other) noexcept
      : fd_(other.fd_), tls_(std::move(other.tls_)), sent_(other.sent_), received_(other.received_),
        messages_sent_(other.messages_sent_), messages_received_(other.messages_received_), idle_(other.idle_),
        stop_(other.stop_) {
    other.fd_ = -1;
  }
  channel& operator=(channel&&) = delete;
  channel(const channel&) = delete;
  ~channel();

  /// Connects to "host:port" within `idle` and proves the cluster token
  /// `key` (messages/handshake.h) before anything else; then TLS with `tls`.
  static expected<channel> connect(const std::string& endpoint, handshake::key_view key,
                                   std::chrono::milliseconds idle, const std::atomic<bool>* stop = nullptr,
                                   tls::context* tls = nullptr);

  void limits(std::chrono::milliseconds idle, const std::atomic<bool>* stop) {
    idle_ = idle;
    stop_ = stop;
  }

  expected<void> send(const request& r);
  expected<request> receive_request();
  expected<void> send(const reply& r);
  expected<reply> receive_reply();

  /// Tensor `index` (0 embeddings, 1 optimizer state): n elements as chunks
  /// of at most chunk_elements, each a BulkChunk followed by its bytes.
  expected<void> send_tensor(std::uint8_t index, const float* data, std::uint64_t n);
  /// Reads tensor `index` into dest[0, n), chunks in order.
  expected<void> receive_tensor(std::uint8_t index, float* dest, std::uint64_t n);
  /// Reads tensor `index` of n elements a chunk at a time into `buffer`
  /// (chunk_elements at most) and hands each chunk to `sink`, in order: a
  /// tensor larger than memory goes to a file without being held whole.
  expected<void> receive_tensor(std::uint8_t index, std::uint64_t n, std::vector<float>& buffer,
                                const std::function<expected<void>(std::span<const float>)>& sink);

  /// A put's rows [first, first + count) of `l`, in blocks of l.block_rows()
  /// rows, each its embeddings' chunk then its optimizer state's: the rows
  /// of a block travel together, so a receiver holds no more than a block.
  /// `embeddings` and `state` point at row `first`; `first` is a multiple of
  /// l.block_rows(), and so is `count` unless it reaches the last row.
  expected<void> send_rows(const rows_layout& l, std::uint64_t first, std::uint64_t count, const float* embeddings,
                           const float* state);
  /// Reads what send_rows sent with the same arguments into `embeddings`
  /// and `state` (room for `count` rows each), every chunk checked to be
  /// the one expected.
  expected<void> receive_rows(const rows_layout& l, std::uint64_t first, std::uint64_t count, float* embeddings,
                              float* state);

  int fd() const { return fd_; }
  /// Bytes written to and read from the socket so far.
  std::uint64_t bytes_sent() const { return sent_; }
  std::uint64_t bytes_received() const { return received_; }
  /// Cap'n Proto messages written and read so far: requests, replies and
  /// each tensor chunk's header (a chunk's bytes follow its header).
  std::uint64_t messages_sent() const { return messages_sent_; }
  std::uint64_t messages_received() const { return messages_received_; }

private:
  expected<void> write_all(const void* data, std::size_t n);
  expected<void> read_all(void* data, std::size_t n);
  /// read_all and write_all over TLS: `op` moves bytes through the session.
  template <class Ptr, class Op>
  expected<void> tls_transfer(Ptr p, std::size_t n, std::uint64_t& counted, Op op);
  expected<void> send_message(const void* flat, std::size_t bytes);
  expected<std::string> receive_message(); // the flat words of one message
  /// The next chunk header of tensor `index` (n elements, `offset` read so
  /// far), checked to fit: its element count.
  expected<std::uint64_t> receive_chunk_header(std::uint8_t index, std::uint64_t n, std::uint64_t offset);
  /// Sends or reads one chunk: elements [offset, offset + count) of tensor
  /// `index` (n elements); a read chunk must be exactly that one.
  expected<void> send_chunk(std::uint8_t index, std::uint64_t offset, std::uint64_t count, const float* data);
  expected<void> receive_chunk(std::uint8_t index, std::uint64_t n, std::uint64_t offset, std::uint64_t count,
                               float* dest);

  int fd_ = -1;
  tls::session tls_;
  std::uint64_t sent_ = 0, received_ = 0;
  std::uint64_t messages_sent_ = 0, messages_received_ = 0;
  std::chrono::milliseconds idle_{60000};
  const std::atomic<bool>* stop_ = nullptr;
};

} // namespace abg::msg::bulk
