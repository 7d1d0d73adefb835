#include "tools/local_host.h"

#include <cstring>
#include <set>

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <unistd.h>

namespace abg::tools {

namespace {

std::string address_text(const sockaddr* a) {
  char text[INET6_ADDRSTRLEN] = {};
  if (a->sa_family == AF_INET)
    ::inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(a)->sin_addr, text, sizeof text);
  else if (a->sa_family == AF_INET6)
    ::inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(a)->sin6_addr, text, sizeof text);
  return text;
}

} // namespace

bool is_local_host(const std::string& host) {
  if (host == "localhost" || host == "::1" || host.starts_with("127.")) return true;
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) == 0 && host == name) return true;
  std::set<std::string> mine;
  ifaddrs* all = nullptr;
  if (::getifaddrs(&all) == 0) {
    for (auto* i = all; i; i = i->ifa_next)
      if (i->ifa_addr) mine.insert(address_text(i->ifa_addr));
    ::freeifaddrs(all);
  }
  // A name: any of its addresses (resolved locally: /etc/hosts or the resolver).
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* found = nullptr;
  bool local = mine.contains(host);
  if (!local && ::getaddrinfo(host.c_str(), "1", &hints, &found) == 0) {
    for (auto* f = found; f && !local; f = f->ai_next) {
      auto text = address_text(f->ai_addr);
      local = mine.contains(text) || text.starts_with("127.") || text == "::1";
    }
    ::freeaddrinfo(found);
  }
  return local;
}

} // namespace abg::tools
