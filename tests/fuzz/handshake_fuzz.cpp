// The cluster-token handshake, the one protocol of abg's own and the first
// thing a stranger's bytes meet: the server side (what the gate runs on each
// accepted connection) and the client side, each reading the input from its
// socket. Bit 0 of the first byte picks the side, bit 1 the TLS flag.
#include <cstdlib>

#include <fcntl.h>

#include "messages/handshake.h"
#include "tests/fuzz/fuzz_input.h"

using namespace abg;
namespace hs = abg::msg::handshake;

namespace {
constexpr std::uint8_t key[32] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16,
                                  17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32};
} // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  if (!fuzz::seeds_dir()) return 0;
  std::array<std::uint8_t, hs::nonce_bytes> nonce{};
  for (std::size_t i = 0; i < nonce.size(); ++i) nonce[i] = static_cast<std::uint8_t>(i * 7);
  for (bool tls : {false, true}) {
    auto c = hs::hello('c', nonce, tls);
    auto s = hs::hello('s', nonce, tls);
    std::string client(reinterpret_cast<const char*>(c.data()), c.size());
    client.append(hs::mac_bytes, '\x5a'); // a proof (wrong: the server's nonce is fresh)
    std::string server(reinterpret_cast<const char*>(s.data()), s.size());
    server += '\x01';
    server.append(hs::mac_bytes, '\x33'); // a verdict and a server proof
    fuzz::write_seed(tls ? "client-tls" : "client", std::string(1, tls ? '\x02' : '\x00') + client);
    fuzz::write_seed(tls ? "server-tls" : "server", std::string(1, tls ? '\x03' : '\x01') + server);
  }
  std::exit(0);
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const bool tls = (data[0] & 2) != 0;
  int fd = fuzz::socket_with(fuzz::as_text({data + 1, size - 1}));
  if (data[0] & 1) {
    (void)hs::run_client(fd, key, tls, std::chrono::milliseconds(200), "fuzz token");
  } else {
    ::fcntl(fd, F_SETFL, O_NONBLOCK);
    hs::server s(fd, key, tls);
    auto step = s.start();
    // The input is all there: a bounded number of reads reaches its end.
    for (int i = 0; i < 64 && step == hs::server::step::more; ++i) step = s.on_readable();
  }
  ::close(fd);
  return 0;
}
