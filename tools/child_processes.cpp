#include "tools/child_processes.h"

#include <cerrno>
#include <csignal>
#include <cstring>
#include <map>

#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

namespace abg::tools {

namespace {

volatile std::sig_atomic_t forwarded_signal = 0;

extern "C" void remember_signal(int signo) { forwarded_signal = signo; }

struct running {
  std::string prefix;
  pid_t pid = -1;
  int fd = -1;
  std::string partial;
  int status = -1;
};

void print_line(const running& c, std::string_view line) {
  if (line.starts_with(c.prefix))
    fmt::print(stderr, "{}\n", line);
  else
    fmt::print(stderr, "{}{}\n", c.prefix, line);
}

} // namespace

int run_children(const std::vector<child_spec>& children) {
  std::vector<running> kids;
  int worst = 0;
  struct sigaction sa{};
  sa.sa_handler = remember_signal;
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);
  for (const auto& spec : children) {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) {
      fmt::print(stderr, "error: cannot make a pipe for {}: {}\n", spec.label, std::strerror(errno));
      worst = 1;
      continue;
    }
    std::vector<std::string> args = spec.argv;
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    pid_t pid = ::fork();
    if (pid == 0) {
      ::dup2(fds[1], STDOUT_FILENO);
      ::dup2(fds[1], STDERR_FILENO);
      int devnull = ::open("/dev/null", O_RDONLY);
      if (devnull >= 0) ::dup2(devnull, STDIN_FILENO);
      ::signal(SIGINT, SIG_DFL);
      ::signal(SIGTERM, SIG_DFL);
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
    ::close(fds[1]);
    if (pid < 0) {
      fmt::print(stderr, "error: cannot start {}: {}\n", spec.label, std::strerror(errno));
      ::close(fds[0]);
      worst = 1;
      continue;
    }
    kids.push_back({fmt::format("[{}] ", spec.label), pid, fds[0], {}, -1});
  }
  int sent = 0;
  std::size_t open = kids.size();
  while (open > 0) {
    if (forwarded_signal != 0 && sent != forwarded_signal) {
      sent = forwarded_signal;
      for (auto& k : kids)
        if (k.status < 0) ::kill(k.pid, sent);
    }
    std::vector<pollfd> polls;
    std::vector<running*> owners;
    for (auto& k : kids)
      if (k.fd >= 0) {
        polls.push_back({k.fd, POLLIN, 0});
        owners.push_back(&k);
      }
    int n = ::poll(polls.data(), polls.size(), 200);
    if (n < 0 && errno != EINTR) break;
    for (std::size_t i = 0; n > 0 && i < polls.size(); ++i) {
      if (!(polls[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      auto& k = *owners[i];
      char buf[65536];
      auto got = ::read(k.fd, buf, sizeof buf);
      if (got > 0) {
        k.partial.append(buf, static_cast<std::size_t>(got));
        for (auto nl = k.partial.find('\n'); nl != std::string::npos; nl = k.partial.find('\n')) {
          print_line(k, std::string_view(k.partial).substr(0, nl));
          k.partial.erase(0, nl + 1);
        }
      } else if (got == 0 || (errno != EINTR && errno != EAGAIN)) {
        if (!k.partial.empty()) print_line(k, k.partial);
        ::close(k.fd);
        k.fd = -1;
        --open;
      }
    }
  }
  for (auto& k : kids) {
    int status = 0;
    while (::waitpid(k.pid, &status, 0) < 0 && errno == EINTR) {
    }
    int code = WIFEXITED(status) ? WEXITSTATUS(status) : WIFSIGNALED(status) ? 128 + WTERMSIG(status) : 1;
    worst = std::max(worst, code);
  }
  return worst;
}

} // namespace abg::tools
