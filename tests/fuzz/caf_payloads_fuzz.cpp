// Every payload type the roles send each other, as CAF's binary deserializer
// reads it from a connection (through abg's inspect overloads, and for
// tensors the frame decoder): a whole caf::message with its type names (what
// BASP hands a node once a peer has passed the gate), or one payload type
// picked by the first input byte. Handles to remote actors inside trainer_setup
// and member are CAF's own code; they are read here too.
#include <cstdlib>
#include <memory>
#include <vector>

#include <caf/all.hpp>

#include "messages/interfaces.h"
#include "tests/fuzz/fuzz_input.h"

using namespace abg;

namespace {

caf::actor_system& sys() {
  static caf::actor_system_config cfg = [] {
    caf::actor_system_config c;
    msg::register_message_types(c);
    c.set("scheduler.max-threads", 1);
    c.set("logger.verbosity", caf::atom("quiet"));
    return c;
  }();
  // Never destroyed: its threads would outlive what exit() tears down.
  static auto* system = new caf::actor_system{cfg};
  return *system;
}

template <class T>
void read_as(const std::uint8_t* data, std::size_t size) {
  caf::binary_deserializer src{sys(), reinterpret_cast<const char*>(data), size};
  T x{};
  (void)src(x);
}

using reader = void (*)(const std::uint8_t*, std::size_t);
const reader readers[] = {
  read_as<caf::message>,       read_as<msg::bucket>,         read_as<msg::part_key>,
  read_as<msg::part_version>,  read_as<msg::grant>,          read_as<msg::bucket_stats>,
  read_as<msg::partition_key>, read_as<msg::partition_chunk>, read_as<msg::partition_info>,
  read_as<msg::named_tensor>,  read_as<msg::table_file>,     read_as<msg::table_save>,
  read_as<msg::table_restore>, read_as<msg::trainer_status>, read_as<msg::run_summary>,
  read_as<msg::data_listing>,  read_as<msg::tensor>,         read_as<msg::trainer_setup>,
  read_as<msg::member>,        read_as<msg::node_status>,    read_as<msg::log_line>,
  read_as<msg::param_status>,
};
constexpr std::size_t reader_count = sizeof readers / sizeof readers[0];

template <class T>
std::string written(std::uint8_t selector, const T& x) {
  std::vector<char> buf;
  caf::binary_serializer sink{sys(), buf};
  if (auto err = sink(const_cast<T&>(x))) std::abort();
  return std::string(1, static_cast<char>(selector)) + std::string(buf.begin(), buf.end());
}

} // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  if (!fuzz::seeds_dir()) return 0;
  msg::partition_chunk chunk;
  chunk.key = {"node", 2};
  chunk.version = 5;
  chunk.total_rows = 2;
  chunk.embeddings = msg::tensor::make({2, 3}, {1, 2, 3, 4, 5, 6});
  chunk.optim_state = msg::tensor::make({2}, {0.5f, 0.25f});
  fuzz::write_seed("message", written(0, caf::make_message(msg::put_atom::value, chunk)));
  fuzz::write_seed("chunk", written(7, chunk));
  fuzz::write_seed("info", written(8, msg::partition_info{{"node", 1}, 3, 10, 4}));
  fuzz::write_seed("named", written(9, msg::named_tensor{"rel0", msg::tensor::make({2}, {1, -1})}));
  msg::run_summary summary;
  summary.buckets_per_trainer = {3, 4};
  fuzz::write_seed("summary", written(14, summary));
  msg::data_listing listing{"00ff", "abc", "0.1.0", {}};
  fuzz::write_seed("listing", written(15, listing));
  fuzz::write_seed("tensor", written(16, msg::tensor::make({3}, {1, 2, 3})));
  msg::node_status status{1 << 20, {1, 2, 3, 4}, {5, 6, 7, 8}, 9, {"127.0.0.1:4000"}, {10}, {11}, {12, 13, 14, 18},
                          {15, 16, 17, 19}, {20}, {21}};
  status.flows = {{"127.0.0.1:4000", true, "trainer", 7, 22, 2300}, {"127.0.0.1:4000", false, "node", 0, 1, 40}};
  status.actors = {{7, "lock_server"}};
  status.local_ends = {"127.0.0.1:51000"};
  fuzz::write_seed("node_status", written(19, status));
  fuzz::write_seed("param_status", written(21, msg::param_status{2, 64, 3, 4, 48, 96, 1.5}));
  fuzz::write_seed("log_line", written(20, msg::log_line{"b", 1700000000000000, "node b: joined"}));
  std::_Exit(0); // the actor system's threads are still running
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  readers[data[0] % reader_count](data + 1, size - 1);
  return 0;
}
