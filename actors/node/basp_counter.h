// Counts CAF's BASP messages in one direction of a connection, from its
// bytes in order (secure_remoting's scribes feed it what they read and
// write). A BASP message is a header of caf::io::basp::header_size bytes
// (operation at byte 0, the payload's length a 32-bit integer in network
// order at byte 4, the source and destination actor ids 64-bit at bytes 16
// and 24), then that many bytes of payload. CAF 0.17 counts no messages itself.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>

namespace abg::actors {

/// What a BASP header says of its message.
struct basp_message {
  std::uint8_t operation = 0;       // caf::io::basp::message_type
  std::uint64_t source = 0, dest = 0; // actor ids (0: none, or an anonymous sender)
  std::uint64_t bytes = 0;          // header and payload
};

class basp_counter {
public:
  static constexpr std::size_t header_bytes = 32; // caf::io::basp::header_size (checked in the .cpp)

  /// Takes the next `n` bytes of the stream; the messages whose header
  /// they completed, each also passed to `seen` when given.
  std::uint64_t feed(const void* bytes, std::size_t n, const std::function<void(const basp_message&)>& seen = {});

private:
  std::array<unsigned char, header_bytes> header_{};
  std::size_t have_ = 0;    // bytes of the current header read so far
  std::uint64_t skip_ = 0;  // payload bytes still to pass
};

} // namespace abg::actors
