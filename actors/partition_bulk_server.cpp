#include "actors/partition_bulk_server.h"

#include <cerrno>
#include <cstring>

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fmt/format.h>

#include "abg/storage/host_memory.h"
#include "actors/blocking_peer.h"
#include "actors/node/secure_remoting.h"
#include "actors/traffic.h"
#include "messages/bulk_wire.h"

namespace abg::actors {

expected<std::unique_ptr<partition_bulk_server>> partition_bulk_server::start(caf::actor_system& sys,
                                                                              msg::partition_server_actor server,
                                                                              const std::string& host,
                                                                              deadlines limits,
                                                                              std::shared_ptr<const partition_shapes> shapes,
                                                                              bool streamed_puts) {
  std::unique_ptr<partition_bulk_server> s(new partition_bulk_server(sys, std::move(server), limits));
  s->shapes_ = std::move(shapes);
  s->streamed_puts_ = streamed_puts;
  s->gate_ = gate_of(sys);
  if (!s->gate_) return fail("partition server bulk channel: this process has no cluster token to guard it with");
  s->intake_->server = s.get();
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  if (int rc = ::getaddrinfo(host.empty() ? nullptr : host.c_str(), "0", &hints, &found); rc != 0)
    return fail("partition server bulk channel: cannot resolve {}: {}", host, ::gai_strerror(rc));
  int fd = ::socket(found->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (fd < 0 || ::bind(fd, found->ai_addr, found->ai_addrlen) != 0 || ::listen(fd, 64) != 0) {
    int saved = errno;
    ::freeaddrinfo(found);
    if (fd >= 0) ::close(fd);
    return fail("partition server bulk channel: cannot listen on {}: {}", host, std::strerror(saved));
  }
  ::freeaddrinfo(found);
  sockaddr_storage bound{};
  socklen_t len = sizeof bound;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &len);
  s->port_ = ntohs(bound.ss_family == AF_INET ? reinterpret_cast<sockaddr_in*>(&bound)->sin_port
                                              : reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port);
  s->listener_ = fd;
  s->acceptor_ = std::jthread([raw = s.get()](std::stop_token stop) { raw->accept_loop(stop); });
  return s;
}

partition_bulk_server::~partition_bulk_server() {
  {
    std::lock_guard lock(intake_->mutex);
    intake_->server = nullptr;
  }
  stopping_ = true;
  acceptor_.request_stop();
  if (acceptor_.joinable()) acceptor_.join();
  std::list<connection> all;
  {
    std::lock_guard lock(mutex_);
    all.swap(connections_);
  }
  all.clear(); // joins: each stops within 50 ms of `stopping_`
  if (listener_ >= 0) ::close(listener_);
}

void partition_bulk_server::accept_loop(std::stop_token stop) {
  while (!stop.stop_requested()) {
    pollfd p{listener_, POLLIN, 0};
    if (::poll(&p, 1, 50) <= 0) continue;
    if (active_ >= max_connections) continue; // the rest waits in the listen queue
    int fd = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) continue;
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    gate_->admit(fd, [in = intake_](int passed, msg::tls::session tls) {
      std::lock_guard lock(in->mutex);
      if (in->server)
        in->server->start_serving(passed, std::move(tls));
      else
        ::close(passed);
    });
  }
}

void partition_bulk_server::start_serving(int fd, msg::tls::session tls) {
  ++active_;
  std::lock_guard lock(mutex_);
  // Finished connections' threads are joined as new ones come.
  connections_.remove_if([](const connection& c) { return c.done->load(); });
  auto done = std::make_shared<std::atomic<bool>>(false);
  connections_.push_back({done, std::jthread([this, fd, done, tls = std::move(tls)]() mutable {
                            serve(fd, std::move(tls));
                            --active_;
                            *done = true;
                          })});
}

void partition_bulk_server::serve(int fd, msg::tls::session tls) {
  msg::bulk::channel ch(fd, std::move(tls));
  ch.limits(std::chrono::duration_cast<std::chrono::milliseconds>(limits_.request), &stopping_);
  // Its bytes are traffic of the request's purpose (a connection that never
  // sent a valid request counts as swaps).
  traffic::bulk_meter meter(ch, traffic::kind::swaps);
  auto req = ch.receive_request();
  if (!req) {
    // A peer that sends garbage is answered (if it still listens) and dropped.
    (void)ch.send(msg::bulk::reply{false, req.error().message});
    return;
  }
  if (req->purpose == 1) meter.purpose(traffic::kind::checkpoints);
  blocking_peer<msg::partition_server_actor> server(sys_, server_, limits_.request, &stopping_);
  msg::partition_key key{req->entity, req->part};
  if (req->what == msg::bulk::request::op::get) {
    // The whole partition: the actor shares its stored tensors, no copy.
    auto c = server.ask<msg::partition_chunk>("bulk get", msg::get_atom::value, key, req->version, uint64_t{0},
                                              ~uint64_t{0});
    if (!c) {
      (void)ch.send(msg::bulk::reply{false, c.error().message});
      return;
    }
    const auto rows = c->embeddings.shape.empty() ? 0 : static_cast<std::uint64_t>(c->embeddings.shape[0]);
    const auto dim = c->embeddings.shape.size() == 2 ? c->embeddings.shape[1] : 0;
    if (!ch.send(msg::bulk::reply{true, "", c->version, rows, dim, msg::state_width_of(c->optim_state) != 1})) return;
    if (!ch.send_tensor(0, c->embeddings.data.get(), c->embeddings.numel())) return;
    (void)ch.send_tensor(1, c->optim_state.data.get(), c->optim_state.numel());
    return;
  }
  // put: the rows go straight into the new partition's memory, once the
  // claimed size is known to fit; the client waits for that verdict. A server
  // that stores on disk takes the put a block of rows at a time and hands
  // each block on before the next is read, so no put is ever whole here.
  const msg::bulk::rows_layout layout{req->rows, req->dim, req->elementwise_state ? req->dim : 1};
  if (auto fits = check_put(shapes_.get(), key, layout.rows, layout.dim, layout.width); !fits) {
    (void)ch.send(msg::bulk::reply{false, fits.error().message});
    return;
  }
  const auto held = streamed_puts_ ? std::min(layout.rows, layout.block_rows()) : layout.rows;
  const auto emb_n = held * static_cast<std::uint64_t>(layout.dim);
  const auto state_n = held * static_cast<std::uint64_t>(layout.width);
  if (auto fits = storage::check_allocation(fmt::format("a put of partition {}", msg::to_string(key)),
                                            (emb_n + state_n) * sizeof(float));
      !fits) {
    (void)ch.send(msg::bulk::reply{false, fits.error().message});
    return;
  }
  float* emb_out = nullptr;
  float* state_out = nullptr;
  msg::tensor emb, state;
  try {
    emb = msg::tensor::allocate({static_cast<std::int64_t>(held), layout.dim}, emb_n, emb_out);
    state = msg::tensor::allocate(msg::state_shape(held, layout.width), state_n, state_out);
  } catch (const std::bad_alloc&) {
    (void)ch.send(msg::bulk::reply{false, fmt::format("a put of partition {}: cannot allocate {} rows of {}",
                                                      msg::to_string(key), held, layout.dim)});
    return;
  }
  // The put is accepted: only now does the client send its rows, so a refusal
  // above reaches it before it has written anything we would not read.
  if (!ch.send(msg::bulk::reply{true})) return;
  // A block the server refuses (a conflicting version, a disk error) ends
  // the put, but the rest of its rows are still read, a block at a time, so
  // that the client, which reads nothing until it has sent them all, gets
  // the reason instead of a reset connection.
  std::string refused;
  bool complete = false;
  for (std::uint64_t first = 0; !complete;) {
    const auto n = std::min(held, layout.rows - first);
    if (!ch.receive_rows(layout, first, n, emb_out, state_out)) {
      // The client went away midway: the blocks already handed on are
      // dropped now, with their files on disk, not at this key's next put.
      if (first > 0 && refused.empty())
        (void)server.ask<bool>("bulk put", msg::abort_atom::value, key, req->version);
      return;
    }
    for (auto most = held_most_.load(); n > most && !held_most_.compare_exchange_weak(most, n);) {
    }
    first += n;
    if (!refused.empty()) {
      if (first >= layout.rows) break;
      continue;
    }
    msg::partition_chunk c;
    c.key = key;
    c.version = req->version;
    c.base_version = req->base_version;
    c.row_offset = first - n;
    c.total_rows = layout.rows;
    c.embeddings = n == held ? emb : msg::tensor::view({static_cast<std::int64_t>(n), layout.dim}, emb.data, emb_out,
                                                       n * static_cast<std::uint64_t>(layout.dim));
    c.optim_state = n == held ? state : msg::state_rows(state.data, state_out, 0, n, layout.width);
    // The server answers once the block is stored (on disk: written by its
    // job), so the buffer is free again when the answer comes.
    auto done = server.ask<bool>("bulk put", msg::put_atom::value, std::move(c));
    if (!done)
      refused = done.error().message;
    else if (*done != (first >= layout.rows))
      refused = "the partition server did not complete the partition";
    else
      complete = *done;
    if (!refused.empty() && first >= layout.rows) break;
  }
  (void)ch.send(msg::bulk::reply{complete, refused});
}

} // namespace abg::actors
