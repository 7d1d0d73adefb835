#include <doctest/doctest.h>

#include <cstring>
#include <new>

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <numeric>
#include <random>

#include <capnp/message.h>
#include <capnp/serialize.h>

#include "messages/interfaces.h"
#include "messages/tensor.capnp.h"
#include "messages/tensor_codec.h"

using namespace abg::msg;

namespace {

tensor iota_tensor(std::vector<int64_t> shape) {
  std::size_t n = 1;
  for (auto d : shape) n *= static_cast<std::size_t>(d);
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<float>(i) * 0.5f - 3.0f;
  return tensor::make(std::move(shape), std::move(v));
}

struct frame_fields {
  std::vector<int64_t> shape{2, 2};
  uint64_t total = 4;
  uint32_t index = 0;
  uint32_t count = 1;
  uint64_t offset = 0;
  std::size_t data_bytes = 16;
};

frame craft(const frame_fields& f) {
  capnp::MallocMessageBuilder b;
  auto r = b.initRoot<TensorFrame>();
  r.setDtype(DType::FLOAT32);
  auto s = r.initShape(static_cast<unsigned>(f.shape.size()));
  for (unsigned i = 0; i < f.shape.size(); ++i) s.set(i, f.shape[i]);
  r.setTotalElements(f.total);
  r.setChunkIndex(f.index);
  r.setChunkCount(f.count);
  r.setOffset(f.offset);
  r.initData(static_cast<unsigned>(f.data_bytes));
  auto words = capnp::messageToFlatArray(b);
  auto bytes = words.asBytes();
  return frame(bytes.begin(), bytes.end());
}

}  // namespace

TEST_CASE("tensor codec round trip") {
  for (auto shape : std::vector<std::vector<int64_t>>{{3, 4}, {0, 5}, {}, {7}, {2, 3, 4}}) {
    auto t = iota_tensor(shape);
    auto frames = encode_tensor(t);
    REQUIRE(frames.has_value());
    CHECK(frames->size() == 1);
    auto back = decode_tensor(*frames);
    REQUIRE(back.has_value());
    CHECK(*back == t);
  }
  // Shape and data must agree.
  CHECK_FALSE(encode_tensor(tensor::make({3, 3}, std::vector<float>(8))).has_value());
  CHECK_FALSE(encode_tensor(tensor::make({-1}, {})).has_value());
}

TEST_CASE("large tensors travel in chunks well below the 64 MiB reader limit") {
  auto t = iota_tensor({1000, 1000});  // 4 MB
  auto frames = encode_tensor(t, 256 * 1024);
  REQUIRE(frames.has_value());
  CHECK(frames->size() == 16);
  for (const auto& f : *frames) CHECK(f.size() <= 256 * 1024 + 256);
  auto back = decode_tensor(*frames);
  REQUIRE(back.has_value());
  CHECK(*back == t);
  // Default chunking: 12 MB -> two frames of at most 8 MiB payload.
  auto big = iota_tensor({3'000'000});
  auto bf = encode_tensor(big);
  REQUIRE(bf.has_value());
  CHECK(bf->size() == 2);
  for (const auto& f : *bf) CHECK(f.size() < (std::size_t{8} << 20) + 4096);
  auto bb = decode_tensor(*bf);
  REQUIRE(bb.has_value());
  CHECK(*bb == big);
  // Missing, reordered, duplicated chunks are errors.
  std::vector<frame> missing(frames->begin(), frames->end() - 1);
  CHECK_FALSE(decode_tensor(missing).has_value());
  auto swapped = *frames;
  std::swap(swapped[3], swapped[4]);
  CHECK_FALSE(decode_tensor(swapped).has_value());
  auto dup = *frames;
  dup.insert(dup.begin() + 2, dup[1]);
  CHECK_FALSE(decode_tensor(dup).has_value());
  auto extra = *frames;
  extra.push_back(extra.back());
  CHECK_FALSE(decode_tensor(extra).has_value());
  // Frames of two different tensors do not mix.
  auto other = encode_tensor(iota_tensor({500, 2000}), 256 * 1024);
  REQUIRE(other.has_value());
  auto mixed = *frames;
  mixed[5] = (*other)[5];
  CHECK_FALSE(decode_tensor(mixed).has_value());
}

TEST_CASE("truncated and hostile frames are rejected") {
  auto t = iota_tensor({64, 16});
  auto frames = encode_tensor(t);
  REQUIRE(frames.has_value());
  const frame good = frames->front();
  // Truncations at every word boundary and odd sizes.
  for (std::size_t cut = 0; cut < good.size(); cut += (cut < 64 ? 1 : 40)) {
    std::vector<frame> fs{frame(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(cut))};
    CHECK_FALSE(decode_tensor(fs).has_value());
  }
  // Trailing garbage.
  auto longer = good;
  longer.resize(longer.size() + 8, 0);
  CHECK_FALSE(decode_tensor(std::vector<frame>{longer}).has_value());
  // Random byte flips: never UB (run under sanitizers), error or a consistent tensor.
  std::mt19937 rng(42);
  for (int i = 0; i < 3000; ++i) {
    auto bad = good;
    for (int k = 0; k < 1 + i % 4; ++k) bad[rng() % bad.size()] = static_cast<uint8_t>(rng());
    auto r = decode_tensor(std::vector<frame>{bad});
    if (r) {
      auto n = checked_numel(r->shape);
      REQUIRE(n.has_value());
      CHECK(*n == r->numel());
    }
  }
  // Pure noise.
  for (int i = 0; i < 500; ++i) {
    frame noise(8 * (1 + rng() % 64));
    for (auto& b : noise) b = static_cast<uint8_t>(rng());
    auto r = decode_tensor(std::vector<frame>{noise});
    if (r) CHECK(*checked_numel(r->shape) == r->numel());
  }
  // Crafted lies, each one field off.
  CHECK(decode_tensor(std::vector<frame>{craft({})}).has_value());
  CHECK_FALSE(decode_tensor(std::vector<frame>{craft({.total = 5})}).has_value());
  CHECK_FALSE(decode_tensor(std::vector<frame>{craft({.shape = {-2, -2}})}).has_value());
  CHECK_FALSE(decode_tensor(std::vector<frame>{craft({.shape = {1 << 30, 1 << 30, 1 << 30}, .total = 0})}).has_value());
  CHECK_FALSE(decode_tensor(std::vector<frame>{craft({.shape = {1, 1, 1, 1, 1, 1, 1, 1, 1}, .total = 1, .data_bytes = 4})}).has_value());
  CHECK_FALSE(decode_tensor(std::vector<frame>{craft({.index = 1, .count = 1})}).has_value());
  CHECK_FALSE(decode_tensor(std::vector<frame>{craft({.count = 0})}).has_value());
  CHECK_FALSE(decode_tensor(std::vector<frame>{craft({.offset = 1})}).has_value());
  CHECK_FALSE(decode_tensor(std::vector<frame>{craft({.data_bytes = 15})}).has_value());
  CHECK_FALSE(decode_tensor(std::vector<frame>{craft({.data_bytes = 20})}).has_value());
  CHECK_FALSE(decode_tensor(std::vector<frame>{craft({.data_bytes = 12})}).has_value());
  CHECK_FALSE(decode_tensor(std::vector<frame>{craft({.count = 1000})}).has_value());
  CHECK_FALSE(decode_tensor(std::vector<frame>{craft({.count = 2, .data_bytes = 0})}).has_value());
  CHECK_FALSE(decode_tensor(std::vector<frame>{}).has_value());
}

namespace {

template <class T>
T caf_round_trip(caf::actor_system& sys, T x) {
  std::vector<char> buf;
  caf::binary_serializer sink{sys, buf};
  REQUIRE_FALSE(sink(x));
  T y;
  caf::binary_deserializer source{sys, buf};
  REQUIRE_FALSE(source(y));
  return y;
}

}  // namespace

TEST_CASE("under RLIMIT_AS = 1 GiB, a 72-byte frame claiming 2^36 elements is refused naming the claim, not bad_alloc") {
  const auto n = uint64_t{1} << 36;
  const frame f = craft({.shape = {static_cast<int64_t>(n)}, .total = n, .data_bytes = 0});
  CHECK(f.size() == 72); // segment table, root, the frame's fields, a one-element shape
  int pipe_fds[2];
  REQUIRE(::pipe(pipe_fds) == 0);
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) { // the limit applies to the child only; it reports through the pipe
    ::close(pipe_fds[0]);
    rlimit limit{std::uint64_t{1} << 30, std::uint64_t{1} << 30};
    std::string out;
    if (::setrlimit(RLIMIT_AS, &limit) != 0) {
      out = "setrlimit failed";
    } else {
      try {
        tensor_assembler a;
        auto r = a.add(f);
        out = r ? "accepted" : r.error();
      } catch (const std::bad_alloc&) {
        out = "bad_alloc";
      }
    }
    (void)!::write(pipe_fds[1], out.data(), out.size());
    ::_exit(0);
  }
  ::close(pipe_fds[1]);
  std::string got;
  char buf[512];
  for (ssize_t k; (k = ::read(pipe_fds[0], buf, sizeof buf)) > 0;) got.append(buf, static_cast<std::size_t>(k));
  ::close(pipe_fds[0]);
  int status = 0;
  ::waitpid(child, &status, 0);
  INFO(got);
  CHECK(got.find("a tensor of shape [68719476736] claims 256.0 GiB") != std::string::npos);
  CHECK(got.find("refused before allocating") != std::string::npos);
}

TEST_CASE("every message type round-trips through CAF's serializer") {
  caf::actor_system_config cfg;
  register_message_types(cfg);
  caf::actor_system sys{cfg};
  auto t = caf_round_trip(sys, iota_tensor({10, 3}));
  CHECK(t == iota_tensor({10, 3}));
  bucket_stats bs{3, 1, {2, 1}, 1000, 1100, 12.5, 0.25, 0.125, {}, {}, 0.0625, 2};
  bs.eval_after.add_edges(2);
  bs.eval_after.add_rank(1);
  bs.eval_after.add_rank(4);
  bs.eval_after.add_auc(0.75, 2);
  bs.eval_after.add_loss(0.5, 2);
  auto bs2 = caf_round_trip(sys, bs);
  CHECK(bs2.trainer == 3);
  CHECK(bs2.trained == bucket{2, 1});
  CHECK(bs2.edges == 1000);
  CHECK(bs2.chunk_edges == 1100);
  CHECK(bs2.loss == 12.5);
  CHECK(bs2.fetch_seconds == 0.125);
  CHECK(bs2.lock_wait_seconds == 0.0625);
  CHECK(bs2.fetched == 2);
  // the held-out evaluation travels as its exact sums
  CHECK(bs2.eval_before.count == 0);
  CHECK(bs2.eval_after.count == 2);
  CHECK(bs2.eval_after.mrr() == 0.625);
  CHECK(bs2.eval_after.hits10 == 2);
  CHECK(bs2.eval_after.hits3 == 1);
  CHECK(bs2.eval_after.auc() == 0.75);
  CHECK(bs2.eval_after.loss() == 0.25);
  partition_chunk pc;
  pc.key.entity = "node";
  pc.key.part = 3;
  pc.version = 9;
  pc.base_version = 8;
  pc.row_offset = 10;
  pc.total_rows = 30;
  pc.embeddings = iota_tensor({5, 4});
  pc.optim_state = iota_tensor({5});
  auto pc2 = caf_round_trip(sys, pc);
  CHECK(pc2.key == partition_key{"node", 3});
  CHECK(pc2.version == 9);
  CHECK(pc2.base_version == 8);
  CHECK(pc2.total_rows == 30);
  CHECK(pc2.embeddings == pc.embeddings);
  CHECK(pc2.optim_state == pc.optim_state);
  grant g;
  g.what = grant::kind::bucket;
  g.epoch = 4;
  g.assigned = {1, 2};
  g.drop = {{0, 3}};
  g.fetch = {{{0, 1}, 17}, {{0, 2}, 18}};
  auto g2 = caf_round_trip(sys, g);
  CHECK(g2.what == grant::kind::bucket);
  CHECK(g2.epoch == 4);
  CHECK(g2.assigned == bucket{1, 2});
  CHECK(g2.drop == g.drop);
  CHECK(g2.fetch == g.fetch);
  auto ts = caf_round_trip(sys, trainer_status{2, true, {1, 1}, 7, {}, 0, 1.5});
  CHECK(ts.busy);
  CHECK(ts.buckets_trained == 7);
  CHECK(ts.busy_seconds == 1.5);
  run_summary rs;
  rs.seed = 5;
  rs.early_stopped_epoch = 2;
  rs.buckets_per_trainer = {3, 4};
  auto rs2 = caf_round_trip(sys, rs);
  CHECK(rs2.seed == 5);
  CHECK(rs2.early_stopped_epoch == 2);
  CHECK(rs2.buckets_per_trainer == std::vector<uint32_t>{3, 4});
  named_tensor nt{"param.x", iota_tensor({3})};
  auto nt2 = caf_round_trip(sys, nt);
  CHECK(nt2.name == "param.x");
  CHECK(nt2.value == nt.value);
  member m;
  m.name = "b";
  m.host = "127.0.0.1";
  m.port = 29611;
  m.dataset = "00ff";
  auto m2 = caf_round_trip(sys, m);
  CHECK(m2.name == "b");
  CHECK(m2.port == 29611);
  CHECK_FALSE(static_cast<bool>(m2.trainer));  // a role the node does not host stays invalid
  // Readable in logs.
  CHECK(caf::deep_to_string(bs).find("bucket_stats") != std::string::npos);
  // A hostile serialized tensor or grant is an error, not UB.
  std::vector<char> buf;
  {
    caf::binary_serializer sink{sys, buf};
    std::vector<frame> frames{craft({.total = 5})};
    REQUIRE_FALSE(sink(frames));
  }
  tensor bad;
  caf::binary_deserializer source{sys, buf};
  CHECK(source(bad));
  std::vector<char> buf2;
  {
    caf::binary_serializer sink{sys, buf2};
    uint8_t what = 9;
    int32_t epoch = 0;
    bucket b{0, 0};
    std::vector<part_key> drop;
    std::vector<part_version> fetch;
    REQUIRE_FALSE(sink(what, epoch, b, drop, fetch));
  }
  grant bad_grant;
  caf::binary_deserializer source2{sys, buf2};
  CHECK(source2(bad_grant));
  std::vector<char> cut(buf.begin(), buf.begin() + static_cast<std::ptrdiff_t>(buf.size() / 2));
  caf::binary_deserializer source3{sys, cut};
  CHECK(source3(bad));
  // One frame claiming 4 GiB (found by tests/fuzz/caf_payloads_fuzz): refused
  // before anything is allocated for it.
  const char huge[] = {'\x01', '\xff', '\xff', '\xff', '\xff', '\x0f'};
  caf::binary_deserializer source4{sys, huge, sizeof huge};
  auto err = source4(bad);
  REQUIRE(err);
  CHECK(sys.render(err).find("tensor frame claims 4294967295 bytes") != std::string::npos);
}
