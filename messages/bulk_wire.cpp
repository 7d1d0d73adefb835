#include "messages/bulk_wire.h"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <charconv>
#include <cstring>

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <capnp/message.h>
#include <capnp/serialize.h>
#include <fmt/format.h>
#include <kj/exception.h>

#include "messages/bulk.capnp.h"

static_assert(std::endian::native == std::endian::little, "the bulk channel sends little-endian floats");

namespace abg::msg::bulk {

namespace {

std::unexpected<error> lost(std::string why) { return std::unexpected(error{std::move(why), true}); }

using clock_type = std::chrono::steady_clock;

// Waits until fd is ready for `events`, the idle time passes or stop is set.
expected<void> wait_ready(int fd, short events, std::chrono::milliseconds idle, const std::atomic<bool>* stop) {
  const auto until = clock_type::now() + idle;
  for (;;) {
    if (stop && stop->load()) return lost("bulk channel: stopped");
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - clock_type::now());
    if (left.count() <= 0) return lost(fmt::format("bulk channel: no progress within {} s", idle.count() / 1000.0));
    pollfd p{fd, events, 0};
    int n = ::poll(&p, 1, static_cast<int>(std::min<std::int64_t>(left.count(), 50)));
    if (n > 0) return {};
    if (n < 0 && errno != EINTR) return lost(fmt::format("bulk channel: poll: {}", std::strerror(errno)));
  }
}

} // namespace

template <class Ptr, class Op>
expected<void> channel::tls_transfer(Ptr p, std::size_t n, std::uint64_t& counted, Op op) {
  while (n > 0) {
    std::size_t k = 0;
    switch (op(p, n, k)) {
      case tls::io::ok:
        counted += k;
        p += k;
        n -= k;
        continue;
      case tls::io::want_read:
        if (auto ok = wait_ready(fd_, POLLIN, idle_, stop_); !ok) return ok;
        continue;
      case tls::io::want_write:
        if (auto ok = wait_ready(fd_, POLLOUT, idle_, stop_); !ok) return ok;
        continue;
      case tls::io::closed: return lost("bulk channel: the peer closed the TLS connection");
      default: return lost("bulk channel: the TLS connection broke");
    }
  }
  return {};
}

channel::~channel() {
  if (fd_ >= 0) ::close(fd_);
}

expected<channel> channel::connect(const std::string& endpoint, handshake::key_view key,
                                   std::chrono::milliseconds idle, const std::atomic<bool>* stop,
                                   tls::context* tls_context) {
  auto colon = endpoint.rfind(':');
  std::uint16_t port = 0;
  if (colon == std::string::npos ||
      std::from_chars(endpoint.data() + colon + 1, endpoint.data() + endpoint.size(), port).ec != std::errc{})
    return fail("bulk channel: '{}' is not HOST:PORT", endpoint);
  const auto host = endpoint.substr(0, colon);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (int rc = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found); rc != 0)
    return lost(fmt::format("bulk channel: cannot resolve {}: {}", host, ::gai_strerror(rc)));
  int fd = ::socket(found->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) {
    ::freeaddrinfo(found);
    return lost(fmt::format("bulk channel: socket: {}", std::strerror(errno)));
  }
  channel c(fd);
  c.limits(idle, stop);
  int rc = ::connect(fd, found->ai_addr, found->ai_addrlen);
  ::freeaddrinfo(found);
  if (rc != 0 && errno != EINPROGRESS) return lost(fmt::format("bulk channel: cannot connect to {}: {}", endpoint, std::strerror(errno)));
  if (auto ok = wait_ready(fd, POLLOUT, idle, stop); !ok) return std::unexpected(ok.error());
  int err = 0;
  socklen_t len = sizeof err;
  ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
  if (err != 0) return lost(fmt::format("bulk channel: cannot connect to {}: {}", endpoint, std::strerror(err)));
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  bool refused = false;
  if (auto ok = handshake::run_client(fd, key, tls_context != nullptr, idle, "this process's", &refused); !ok) {
    error e{fmt::format("bulk channel: the node at {}: {}", endpoint, ok.error().message)};
    e.lost_peer = !refused; // a refused token is no loss: it stays refused
    return std::unexpected(e);
  }
  if (tls_context) {
    auto s = tls::connect(fd, *tls_context, idle);
    if (!s) return fail("bulk channel: the node at {}: {}", endpoint, s.error().message);
    c.tls_ = std::move(*s);
    SSL_set_read_ahead(c.tls_.get(), 1);
  }
  return c;
}

expected<void> channel::write_all(const void* data, std::size_t n) {
  const char* p = static_cast<const char*>(data);
  if (tls_)
    return tls_transfer(p, n, sent_, [this](const char* q, std::size_t len, std::size_t& k) {
      return tls::write_some(tls_.get(), q, len, k);
    });
  while (n > 0) {
    auto k = ::send(fd_, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (k > 0) {
      sent_ += static_cast<std::uint64_t>(k);
      p += k;
      n -= static_cast<std::size_t>(k);
      continue;
    }
    if (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
      return lost(fmt::format("bulk channel: send: {}", std::strerror(errno)));
    if (auto ok = wait_ready(fd_, POLLOUT, idle_, stop_); !ok) return ok;
  }
  return {};
}

expected<void> channel::read_all(void* data, std::size_t n) {
  char* p = static_cast<char*>(data);
  if (tls_)
    return tls_transfer(p, n, received_, [this](char* q, std::size_t len, std::size_t& k) {
      return tls::read_some(tls_.get(), q, len, k);
    });
  while (n > 0) {
    auto k = ::recv(fd_, p, n, MSG_DONTWAIT);
    if (k > 0) {
      received_ += static_cast<std::uint64_t>(k);
      p += k;
      n -= static_cast<std::size_t>(k);
      continue;
    }
    if (k == 0) return lost("bulk channel: the peer closed the connection");
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
      return lost(fmt::format("bulk channel: recv: {}", std::strerror(errno)));
    if (auto ok = wait_ready(fd_, POLLIN, idle_, stop_); !ok) return ok;
  }
  return {};
}

expected<void> channel::send_message(const void* flat, std::size_t bytes) {
  auto ok = write_all(flat, bytes);
  if (ok) ++messages_sent_;
  return ok;
}

expected<std::string> channel::receive_message() {
  // A Cap'n Proto stream message: segment count - 1, each segment's size in
  // words, padding to a word, then the segments. Only small messages here.
  std::uint32_t first[2];
  if (auto ok = read_all(first, sizeof first); !ok) return std::unexpected(ok.error());
  const std::uint32_t segments = first[0] + 1;
  if (first[0] >= 16) return fail("bulk channel: a message of {} segments (at most 16)", segments);
  std::string table(sizeof first, '\0');
  std::memcpy(table.data(), first, sizeof first);
  const std::size_t table_words = (segments + 2) / 2; // (1 + segments) u32s, padded to words
  if (table_words > 1) {
    table.resize(table_words * 8);
    if (auto ok = read_all(table.data() + 8, table.size() - 8); !ok) return std::unexpected(ok.error());
  }
  std::uint64_t words = 0;
  for (std::uint32_t s = 0; s < segments; ++s) {
    std::uint32_t w = 0;
    std::memcpy(&w, table.data() + 4 + 4 * s, 4);
    words += w;
  }
  if (words * 8 + table.size() > max_message_bytes)
    return fail("bulk channel: a message of {} bytes (at most {})", words * 8 + table.size(), max_message_bytes);
  std::string all = table;
  all.resize(table.size() + words * 8);
  if (auto ok = read_all(all.data() + table.size(), words * 8); !ok) return std::unexpected(ok.error());
  ++messages_received_;
  return all;
}

namespace {

// Parses one flat message as a T and hands its reader to f (which returns an expected).
template <class T, class F>
auto parse(const std::string& bytes, const char* what, F f) -> decltype(f(std::declval<typename T::Reader>())) {
  // Word-aligned copy (a std::string's storage need not be).
  kj::Array<capnp::word> words = kj::heapArray<capnp::word>(bytes.size() / sizeof(capnp::word));
  std::memcpy(words.begin(), bytes.data(), words.size() * sizeof(capnp::word));
  try {
    capnp::ReaderOptions options;
    options.traversalLimitInWords = words.size() + 16;
    options.nestingLimit = 8;
    capnp::FlatArrayMessageReader reader(words.asPtr(), options);
    if (reader.getEnd() != words.end()) return fail("bulk channel: trailing bytes after a {}", what);
    return f(reader.getRoot<T>());
  } catch (const kj::Exception& e) {
    return fail("bulk channel: malformed {}: {}", what, e.getDescription().cStr());
  }
}

} // namespace

expected<void> channel::send(const request& r) {
  capnp::MallocMessageBuilder b;
  auto m = b.initRoot<BulkRequest>();
  m.setOp(r.what == request::op::get ? BulkRequest::Op::GET : BulkRequest::Op::PUT);
  m.setEntity(r.entity);
  m.setPart(r.part);
  m.setVersion(r.version);
  m.setBaseVersion(r.base_version);
  m.setRows(r.rows);
  m.setDim(r.dim);
  m.setPurpose(r.purpose);
  m.setElementwiseState(r.elementwise_state);
  auto flat = capnp::messageToFlatArray(b);
  return send_message(flat.begin(), flat.size() * sizeof(capnp::word));
}

expected<request> channel::receive_request() {
  auto bytes = receive_message();
  if (!bytes) return std::unexpected(bytes.error());
  return parse<BulkRequest>(*bytes, "request", [](BulkRequest::Reader m) -> expected<request> {
    request out;
    auto op = m.getOp();
    if (op != BulkRequest::Op::GET && op != BulkRequest::Op::PUT) return fail("bulk channel: unknown request op");
    out.what = op == BulkRequest::Op::GET ? request::op::get : request::op::put;
    auto entity = m.getEntity();
    if (entity.size() > max_entity_bytes) return fail("bulk channel: an entity name of {} bytes", entity.size());
    out.entity = entity.cStr();
    out.part = m.getPart();
    out.version = m.getVersion();
    out.base_version = m.getBaseVersion();
    out.rows = m.getRows();
    out.dim = m.getDim();
    out.purpose = m.getPurpose();
    out.elementwise_state = m.getElementwiseState();
    if (out.purpose > 1) return fail("bulk channel: unknown purpose {}", out.purpose);
    if (out.what == request::op::put) {
      if (out.rows > max_rows || out.dim < 0 || out.dim > max_dim ||
          out.rows * static_cast<std::uint64_t>(out.dim) > max_elements)
        return fail("bulk channel: a put of {} rows of dimension {} is too large", out.rows, out.dim);
    }
    return out;
  });
}

expected<void> channel::send(const reply& r) {
  capnp::MallocMessageBuilder b;
  auto m = b.initRoot<BulkReply>();
  m.setOk(r.ok);
  m.setError(r.error.substr(0, 4096));
  m.setVersion(r.version);
  m.setRows(r.rows);
  m.setDim(r.dim);
  m.setElementwiseState(r.elementwise_state);
  auto flat = capnp::messageToFlatArray(b);
  return send_message(flat.begin(), flat.size() * sizeof(capnp::word));
}

expected<reply> channel::receive_reply() {
  auto bytes = receive_message();
  if (!bytes) return std::unexpected(bytes.error());
  return parse<BulkReply>(*bytes, "reply", [](BulkReply::Reader m) -> expected<reply> {
    reply out;
    out.ok = m.getOk();
    out.error = m.getError().cStr();
    out.version = m.getVersion();
    out.rows = m.getRows();
    out.dim = m.getDim();
    out.elementwise_state = m.getElementwiseState();
    if (out.ok && (out.rows > max_rows || out.dim < 0 || out.dim > max_dim ||
                   out.rows * static_cast<std::uint64_t>(out.dim) > max_elements))
      return fail("bulk channel: a partition of {} rows of dimension {} is too large", out.rows, out.dim);
    return out;
  });
}

expected<void> channel::send_chunk(std::uint8_t index, std::uint64_t offset, std::uint64_t count, const float* data) {
  capnp::MallocMessageBuilder b;
  auto m = b.initRoot<BulkChunk>();
  m.setTensor(index);
  m.setOffset(offset);
  m.setCount(count);
  auto flat = capnp::messageToFlatArray(b);
  if (auto ok = send_message(flat.begin(), flat.size() * sizeof(capnp::word)); !ok) return ok;
  return write_all(data, count * sizeof(float));
}

expected<void> channel::send_tensor(std::uint8_t index, const float* data, std::uint64_t n) {
  std::uint64_t offset = 0;
  do {
    const auto count = std::min(chunk_elements, n - offset);
    if (auto ok = send_chunk(index, offset, count, data + offset); !ok) return ok;
    offset += count;
  } while (offset < n);
  return {};
}

expected<void> channel::send_rows(const rows_layout& l, std::uint64_t first, std::uint64_t count,
                                  const float* embeddings, const float* state) {
  const auto dim = static_cast<std::uint64_t>(l.dim), width = static_cast<std::uint64_t>(l.width);
  std::uint64_t row = first;
  do {  // an empty put is one empty block
    const auto n = std::min(l.block_rows(), first + count - row);
    if (auto ok = send_chunk(0, row * dim, n * dim, embeddings + (row - first) * dim); !ok) return ok;
    if (auto ok = send_chunk(1, row * width, n * width, state + (row - first) * width); !ok) return ok;
    row += n;
  } while (row < first + count);
  return {};
}

expected<void> channel::receive_chunk(std::uint8_t index, std::uint64_t n, std::uint64_t offset, std::uint64_t count,
                                      float* dest) {
  auto got = receive_chunk_header(index, n, offset);
  if (!got) return std::unexpected(got.error());
  if (*got != count)
    return fail("bulk channel: a chunk of tensor {} at {} has {} elements where {} were due", index, offset, *got,
                count);
  return read_all(dest, count * sizeof(float));
}

expected<void> channel::receive_rows(const rows_layout& l, std::uint64_t first, std::uint64_t count,
                                     float* embeddings, float* state) {
  const auto dim = static_cast<std::uint64_t>(l.dim), width = static_cast<std::uint64_t>(l.width);
  std::uint64_t row = first;
  do {
    const auto n = std::min(l.block_rows(), first + count - row);
    if (auto ok = receive_chunk(0, l.rows * dim, row * dim, n * dim, embeddings + (row - first) * dim); !ok) return ok;
    if (auto ok = receive_chunk(1, l.rows * width, row * width, n * width, state + (row - first) * width); !ok)
      return ok;
    row += n;
  } while (row < first + count);
  return {};
}

expected<std::uint64_t> channel::receive_chunk_header(std::uint8_t index, std::uint64_t n, std::uint64_t offset) {
  auto bytes = receive_message();
  if (!bytes) return std::unexpected(bytes.error());
  struct header {
    std::uint8_t tensor;
    std::uint64_t offset, count;
  };
  auto h = parse<BulkChunk>(*bytes, "chunk", [](BulkChunk::Reader m) -> expected<header> {
    return header{m.getTensor(), m.getOffset(), m.getCount()};
  });
  if (!h) return std::unexpected(h.error());
  if (h->tensor != index || h->offset != offset || h->count > n - offset || h->count > chunk_elements ||
      (h->count == 0 && offset < n))
    return fail("bulk channel: a chunk of tensor {} at {} with {} elements does not fit tensor {} of {} elements "
                "(next element {})",
                h->tensor, h->offset, h->count, index, n, offset);
  return h->count;
}

expected<void> channel::receive_tensor(std::uint8_t index, float* dest, std::uint64_t n) {
  std::uint64_t offset = 0;
  do {
    auto count = receive_chunk_header(index, n, offset);
    if (!count) return std::unexpected(count.error());
    if (auto ok = read_all(dest + offset, *count * sizeof(float)); !ok) return ok;
    offset += *count;
  } while (offset < n);
  return {};
}

expected<void> channel::receive_tensor(std::uint8_t index, std::uint64_t n, std::vector<float>& buffer,
                                       const std::function<expected<void>(std::span<const float>)>& sink) {
  std::uint64_t offset = 0;
  do {
    auto count = receive_chunk_header(index, n, offset);
    if (!count) return std::unexpected(count.error());
    if (buffer.size() < *count) buffer.resize(*count);
    if (auto ok = read_all(buffer.data(), *count * sizeof(float)); !ok) return ok;
    if (auto ok = sink(std::span<const float>(buffer.data(), *count)); !ok) return ok;
    offset += *count;
  } while (offset < n);
  return {};
}

} // namespace abg::msg::bulk
