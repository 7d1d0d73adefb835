// BASP messages counted from a connection's bytes, however the reads and
// writes split them: headers written by CAF's own serializer, so a change of
// its layout or byte order fails here.
#include <doctest/doctest.h>

#include <vector>

#include <caf/binary_serializer.hpp>
#include <caf/io/basp/header.hpp>

#include "actors/node/basp_counter.h"

using namespace abg;

namespace {

// A header announcing `payload` bytes, then those bytes, appended to `out`.
void append_message(std::vector<char>& out, std::uint32_t payload) {
  caf::io::basp::header h{caf::io::basp::message_type::direct_message, 0, payload, 7, 1, 2};
  std::vector<char> head;
  caf::binary_serializer sink{nullptr, head};
  REQUIRE(!sink(h));
  REQUIRE(head.size() == caf::io::basp::header_size);
  out.insert(out.end(), head.begin(), head.end());
  out.insert(out.end(), payload, 'x');
}

} // namespace

TEST_CASE("basp_counter: messages with and without payloads, fed whole or a byte at a time") {
  std::vector<char> stream;
  // Payloads of sizes that look like headers, none, and more than 2^16 (all four length bytes matter).
  for (std::uint32_t payload : {0u, 32u, 5u, 70000u, 0u, 1u})
    append_message(stream, payload);
  actors::basp_counter whole;
  CHECK(whole.feed(stream.data(), stream.size()) == 6);
  actors::basp_counter bytewise;
  std::uint64_t n = 0;
  for (char c : stream)
    n += bytewise.feed(&c, 1);
  CHECK(n == 6);
  // Split in odd pieces, and a message not yet complete at the end: counted at its header.
  actors::basp_counter pieces;
  append_message(stream, 100);
  stream.resize(stream.size() - 50);
  n = 0;
  for (std::size_t at = 0; at < stream.size(); at += 13)
    n += pieces.feed(stream.data() + at, std::min<std::size_t>(13, stream.size() - at));
  CHECK(n == 7);
  CHECK(pieces.feed(std::vector<char>(50, 'x').data(), 50) == 0); // the rest of its payload
}

TEST_CASE("basp_counter: each message's operation, source and destination actors and size, as CAF wrote them") {
  std::vector<char> stream;
  append_message(stream, 70000); // source actor 1, destination 2 (append_message)
  caf::io::basp::header heartbeat{caf::io::basp::message_type::heartbeat, 0, 0, 0, 0, 0};
  caf::binary_serializer sink{nullptr, stream};
  REQUIRE(!sink(heartbeat));
  std::vector<actors::basp_message> seen;
  actors::basp_counter c;
  for (std::size_t at = 0; at < stream.size(); at += 1000)
    c.feed(stream.data() + at, std::min<std::size_t>(1000, stream.size() - at),
           [&](const actors::basp_message& m) { seen.push_back(m); });
  REQUIRE(seen.size() == 2);
  CHECK(seen[0].operation == static_cast<std::uint8_t>(caf::io::basp::message_type::direct_message));
  CHECK(seen[0].source == 1);
  CHECK(seen[0].dest == 2);
  CHECK(seen[0].bytes == 32 + 70000);
  CHECK(seen[1].operation == static_cast<std::uint8_t>(caf::io::basp::message_type::heartbeat));
  CHECK(seen[1].bytes == 32);
}
