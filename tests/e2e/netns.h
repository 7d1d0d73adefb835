// Two network namespaces joined by a veth pair, made and removed by a test:
// two "machines" with their own addresses on one host. The link is shaped
// to a rate with tc's token bucket filter (this kernel has no netem). Needs
// root and iproute2; `why_not` says why when it could not be made.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <unistd.h>

#include <fmt/format.h>

#include "tests/e2e/cli.h"

namespace abg::test {

class netns_pair {
public:
  /// `rate` as tc writes it ("1gbit").
  explicit netns_pair(const std::string& rate) {
    if (::geteuid() != 0) {
      why_not_ = "it needs root (ip netns, tc)";
      return;
    }
    for (const auto* p : {"/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip"})
      if (std::filesystem::exists(p)) ip_ = p;
    if (ip_.empty()) {
      why_not_ = "iproute2's ip is not installed";
      return;
    }
    const auto id = static_cast<unsigned>(::getpid());
    ns_ = {fmt::format("abg-test-{}-a", id), fmt::format("abg-test-{}-b", id)};
    dev_ = {fmt::format("abg{}a", id % 1000000), fmt::format("abg{}b", id % 1000000)};
    // A /30 of 10.231.0.0/16 per test process: addresses only on this veth.
    const unsigned net = (id % 16000) * 4;
    addr_ = {fmt::format("10.231.{}.{}", net / 256, net % 256 + 1), fmt::format("10.231.{}.{}", net / 256, net % 256 + 2)};
    made_ = true;
    std::vector<std::string> steps{
      fmt::format("{} netns add {}", ip_, ns_[0]),
      fmt::format("{} netns add {}", ip_, ns_[1]),
      fmt::format("{} link add {} type veth peer name {}", ip_, dev_[0], dev_[1]),
    };
    for (int k = 0; k < 2; ++k) {
      steps.push_back(fmt::format("{} link set {} netns {}", ip_, dev_[k], ns_[k]));
      steps.push_back(fmt::format("{} -n {} addr add {}/30 dev {}", ip_, ns_[k], addr_[k], dev_[k]));
      steps.push_back(fmt::format("{} -n {} link set {} up", ip_, ns_[k], dev_[k]));
      steps.push_back(fmt::format("{} -n {} link set lo up", ip_, ns_[k]));
      steps.push_back(fmt::format("{} netns exec {} tc qdisc add dev {} root tbf rate {} burst 1mb latency 50ms", ip_,
                                  ns_[k], dev_[k], rate));
    }
    for (auto& step : steps) {
      if (std::system((step + " >/dev/null 2>&1").c_str()) != 0) {
        why_not_ = "`" + step + "` failed";
        return;
      }
    }
    ok_ = true;
  }
  ~netns_pair() {
    if (!made_) return;
    // The veth pair goes with its namespaces.
    for (auto& ns : ns_) (void)std::system(fmt::format("{} netns del {} >/dev/null 2>&1", ip_, ns).c_str());
    (void)std::system(fmt::format("{} link del {} >/dev/null 2>&1", ip_, dev_[0]).c_str());
  }
  netns_pair(const netns_pair&) = delete;
  netns_pair& operator=(const netns_pair&) = delete;

  bool ok() const { return ok_; }
  const std::string& why_not() const { return why_not_; }
  const std::string& address(int side) const { return addr_[static_cast<std::size_t>(side)]; }
  /// Runs a command inside namespace `side`: `ip netns exec NS ...`.
  std::vector<std::string> wrapper(int side) const { return {ip_, "netns", "exec", ns_[static_cast<std::size_t>(side)]}; }
  /// Bytes the veth end of `side` received and sent, as the kernel counts them.
  std::pair<std::uint64_t, std::uint64_t> bytes(int side) const {
    auto counter = [&](const char* which) -> std::uint64_t {
      auto file = std::filesystem::temp_directory_path() / fmt::format("{}.{}", ns_[static_cast<std::size_t>(side)], which);
      (void)std::system(fmt::format("{} netns exec {} cat /sys/class/net/{}/statistics/{}_bytes >{} 2>/dev/null", ip_,
                                    ns_[static_cast<std::size_t>(side)], dev_[static_cast<std::size_t>(side)], which,
                                    file.string())
                          .c_str());
      auto text = read_file(file);
      std::filesystem::remove(file);
      return text.empty() ? 0 : std::stoull(text);
    };
    return {counter("rx"), counter("tx")};
  }

private:
  std::string ip_;
  std::vector<std::string> ns_, dev_, addr_;
  bool made_ = false, ok_ = false;
  std::string why_not_;
};

} // namespace abg::test
