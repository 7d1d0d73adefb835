#include "actors/node/gate.h"

#include <algorithm>
#include <cerrno>
#include <optional>

#include <arpa/inet.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fmt/format.h>

namespace abg::actors {

namespace {

std::string peer_of(int fd) {
  sockaddr_storage a{};
  socklen_t len = sizeof a;
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) return "an unknown peer";
  char text[INET6_ADDRSTRLEN] = {};
  if (a.ss_family == AF_INET) {
    auto* in = reinterpret_cast<sockaddr_in*>(&a);
    ::inet_ntop(AF_INET, &in->sin_addr, text, sizeof text);
    return fmt::format("{}:{}", text, ntohs(in->sin_port));
  }
  auto* in6 = reinterpret_cast<sockaddr_in6*>(&a);
  ::inet_ntop(AF_INET6, &in6->sin6_addr, text, sizeof text);
  return fmt::format("[{}]:{}", text, ntohs(in6->sin6_port));
}

} // namespace

struct gate::waiting {
  waiting(int f, msg::handshake::key_view key, bool with_tls, pass_fn p, std::chrono::steady_clock::time_point d)
      : fd(f), session(f, key, with_tls), pass(std::move(p)), deadline(d), peer(peer_of(f)) {}
  int fd;
  msg::handshake::server session;
  std::optional<msg::tls::acceptor> tls; // once the token is proven, with TLS
  short events() const { return tls ? tls->wants() : POLLIN; }
  pass_fn pass;
  std::chrono::steady_clock::time_point deadline;
  std::string peer;
};

gate::gate(cluster_token token, limits l, log_fn log, std::shared_ptr<msg::tls::context> tls)
    : token_(std::move(token)), limits_(l), log_(std::move(log)), tls_(std::move(tls)), wake_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
  thread_ = std::jthread([this](std::stop_token stop) { loop(stop); });
}

gate::~gate() {
  stop();
  ::close(wake_);
}

void gate::stop() {
  {
    std::lock_guard lock(mutex_);
    if (stopped_) return;
    stopped_ = true;
  }
  thread_.request_stop();
  std::uint64_t one = 1;
  [[maybe_unused]] auto n = ::write(wake_, &one, sizeof one);
  thread_.join();
  for (auto& w : waiting_) ::close(w->fd);
  waiting_.clear();
  std::lock_guard lock(mutex_);
  for (auto& w : arrived_) ::close(w->fd);
  arrived_.clear();
}

void gate::admit(int fd, pass_fn pass) {
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  auto w = std::make_unique<waiting>(fd, token_.key, tls_ != nullptr, std::move(pass),
                                     std::chrono::steady_clock::now() + limits_.timeout);
  {
    std::lock_guard lock(mutex_);
    if (stopped_) {
      ::close(fd);
      return;
    }
    arrived_.push_back(std::move(w));
  }
  std::uint64_t one = 1;
  [[maybe_unused]] auto n = ::write(wake_, &one, sizeof one);
}

void gate::close_refused(waiting& w, const std::string& why) {
  ++refused_;
  if (log_) log_(fmt::format("refused a connection from {}: {}", w.peer, why));
  ::close(w.fd);
}

void gate::loop(std::stop_token stop) {
  std::vector<pollfd> polled;
  while (!stop.stop_requested()) {
    {
      std::lock_guard lock(mutex_);
      for (auto& w : arrived_) {
        if (w->session.start() == msg::handshake::server::step::refused) {
          close_refused(*w, w->session.why());
          continue;
        }
        waiting_.push_back(std::move(w));
      }
      arrived_.clear();
    }
    while (waiting_.size() > limits_.max_pending) {
      close_refused(*waiting_.front(), fmt::format("{} connections were waiting for their handshake; this one had "
                                                   "waited longest",
                                                   waiting_.size()));
      waiting_.pop_front();
    }
    auto now = std::chrono::steady_clock::now();
    for (auto it = waiting_.begin(); it != waiting_.end();) {
      if ((*it)->deadline <= now) {
        close_refused(**it, fmt::format("no handshake within {} ms", limits_.timeout.count()));
        it = waiting_.erase(it);
      } else {
        ++it;
      }
    }
    polled.assign(1, pollfd{wake_, POLLIN, 0});
    auto next = now + std::chrono::seconds(1);
    for (auto& w : waiting_) {
      polled.push_back(pollfd{w->fd, w->events(), 0});
      next = std::min(next, w->deadline);
    }
    auto wait_ms = std::chrono::duration_cast<std::chrono::milliseconds>(next - now).count() + 1;
    if (::poll(polled.data(), polled.size(), static_cast<int>(wait_ms)) < 0 && errno != EINTR) break;
    if (polled[0].revents) {
      std::uint64_t count = 0;
      [[maybe_unused]] auto n = ::read(wake_, &count, sizeof count);
    }
    std::size_t k = 1;
    for (auto it = waiting_.begin(); it != waiting_.end(); ++k) {
      if (polled[k].revents == 0) {
        ++it;
        continue;
      }
      auto& w = **it;
      if (w.tls) {
        auto step = w.tls->on_event();
        if (step == msg::tls::acceptor::step::more) {
          ++it;
          continue;
        }
        if (step == msg::tls::acceptor::step::passed)
          w.pass(w.fd, w.tls->take());
        else
          close_refused(w, w.tls->why());
        it = waiting_.erase(it);
        continue;
      }
      auto step = w.session.on_readable();
      if (step == msg::handshake::server::step::more) {
        ++it;
        continue;
      }
      if (step == msg::handshake::server::step::passed && tls_) {
        // The token is proven: TLS next, within the same deadline.
        w.tls.emplace(w.fd, *tls_);
        auto first = w.tls->on_event();
        if (first == msg::tls::acceptor::step::more) {
          ++it;
          continue;
        }
        if (first == msg::tls::acceptor::step::refused) {
          close_refused(w, w.tls->why());
          it = waiting_.erase(it);
          continue;
        }
      }
      if (step == msg::handshake::server::step::passed)
        w.pass(w.fd, w.tls ? w.tls->take() : msg::tls::session{});
      else
        close_refused(w, w.session.why());
      it = waiting_.erase(it);
    }
  }
}

} // namespace abg::actors
