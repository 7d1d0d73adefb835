// The bulk channel (a partition server's port for whole partitions), read
// from a socket fed with the input: as a server reads a request and, for a
// put of a small partition, its rows; and as a client reads a reply and, for
// a get, the rows that follow. The first input byte picks the side. Claimed
// sizes beyond what the test reads are the decoder's to refuse.
#include <cstdlib>
#include <vector>

#include <sys/socket.h>
#include <unistd.h>

#include "messages/bulk_wire.h"
#include "tests/fuzz/fuzz_input.h"

using namespace abg;
namespace bulk = abg::msg::bulk;

namespace {

// What a channel sends, as the peer reads it: `write` drives a channel
// on one end of a socket pair, the bytes come back from the other.
template <class Write>
std::string sent_by(Write write) {
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) std::abort();
  {
    bulk::channel ch(sv[0]);
    write(ch);
  } // closes sv[0]
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = ::read(sv[1], buf, sizeof buf)) > 0;) out.append(buf, static_cast<std::size_t>(n));
  ::close(sv[1]);
  return out;
}

constexpr std::uint64_t small = 1 << 14; // elements a put or get may carry here

} // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  if (!fuzz::seeds_dir()) return 0;
  std::vector<float> emb(12, 0.5f), state(4, 1.0f);
  bulk::request put;
  put.what = bulk::request::op::put;
  put.entity = "node";
  put.part = 1;
  put.version = 3;
  put.base_version = 2;
  put.rows = 4;
  put.dim = 3;
  fuzz::write_seed("put", std::string("\x00", 1) + sent_by([&](bulk::channel& ch) {
                     fuzz::must(ch.send(put), "send request");
                     fuzz::must(ch.send_rows({4, 3, 1}, 0, 4, emb.data(), state.data()), "send rows");
                   }));
  bulk::request get;
  get.entity = "node";
  fuzz::write_seed("get", std::string("\x00", 1) + sent_by([&](bulk::channel& ch) { fuzz::must(ch.send(get), "send"); }));
  const auto reply = sent_by([&](bulk::channel& ch) {
    fuzz::must(ch.send(bulk::reply{true, "", 3, 4, 3}), "send reply");
    fuzz::must(ch.send_tensor(0, emb.data(), emb.size()), "send rows");
    fuzz::must(ch.send_tensor(1, state.data(), state.size()), "send state");
  });
  fuzz::write_seed("reply", "\x01" + reply);
  fuzz::write_seed("reply-streamed", "\x03" + reply); // received a chunk at a time
  fuzz::write_seed("refusal", "\x01" + sent_by([&](bulk::channel& ch) {
                     fuzz::must(ch.send(bulk::reply{false, "no such partition"}), "send reply");
                   }));
  std::exit(0);
}

// The first byte picks what is received: bit 0 a reply (else a request and
// a put's rows), bit 1 a reply's tensors streamed through a sink (else into
// one buffer).
extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  bulk::channel ch(fuzz::socket_with(fuzz::as_text({data + 1, size - 1})));
  ch.limits(std::chrono::milliseconds(200), nullptr);
  std::uint64_t rows = 0;
  std::int64_t dim = 0;
  if (data[0] & 1) {
    auto rep = ch.receive_reply();
    if (!rep || !rep->ok) return 0;
    rows = rep->rows, dim = rep->dim;
  } else {
    auto req = ch.receive_request();
    if (!req || req->what != bulk::request::op::put) return 0;
    rows = req->rows, dim = req->dim;
  }
  if (dim < 0 || rows > small || static_cast<std::uint64_t>(dim) > small || rows * static_cast<std::uint64_t>(dim) > small)
    return 0;
  std::vector<float> emb(rows * static_cast<std::uint64_t>(dim)), state(rows);
  if (!(data[0] & 1)) {
    // A put's rows in blocks (this small a put is one block).
    (void)ch.receive_rows({rows, dim, 1}, 0, rows, emb.data(), state.data());
    return 0;
  }
  if (data[0] & 2) {
    // Streamed a chunk at a time (a checkpoint gathered from another node).
    std::vector<float> buffer;
    std::uint64_t got = 0;
    auto sink = [&](std::span<const float> v) -> abg::expected<void> {
      if (v.size() > bulk::chunk_elements) std::abort();
      got += v.size();
      return {};
    };
    if (ch.receive_tensor(0, emb.size(), buffer, sink) && ch.receive_tensor(1, state.size(), buffer, sink) &&
        got != emb.size() + state.size())
      std::abort();
    return 0;
  }
  if (ch.receive_tensor(0, emb.data(), emb.size())) (void)ch.receive_tensor(1, state.data(), state.size());
  return 0;
}
