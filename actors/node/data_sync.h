// A node's copy of the imported data against the coordinator's node's, at
// join (docs/cluster.md, "Data at join"): the files that differ are fetched
// from the coordinator's node through messages, checksummed and renamed into
// place, commit points last; or, without fetching, the node is refused,
// naming the first file that differs. A cluster then needs no shared
// filesystem for its data.
#pragma once

#include <atomic>
#include <cstdint>
#include <string_view>

#include <caf/all.hpp>

#include "abg/config.h"
#include "abg/error.h"
#include "actors/deadlines.h"
#include "actors/spawn.h"
#include "messages/interfaces.h"

namespace abg::actors {

struct data_sync_report {
  std::size_t files = 0;      // listed by the coordinator's node
  std::size_t fetched = 0;    // of them, fetched because they differed
  std::uint64_t bytes = 0;    // fetched
  double seconds = 0;         // comparing and fetching
};

/// Before the node reads its data (so before its plan of the run), with
/// the coordinator's data server (its answer to data_atom).
expected<data_sync_report> sync_data(caf::actor_system& sys, const msg::data_server_actor& data, const config& cfg,
                                     std::string_view config_toml, bool fetch, const deadlines& limits,
                                     const std::atomic<bool>* stop, const log_fn& log);

} // namespace abg::actors
