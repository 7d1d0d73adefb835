// The coordinator's node's copy of the imported data, served to nodes that
// join without it or with another (docs/cluster.md, "Data at join"). Only
// the files of the listing can be read, by index: a peer names no path.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "actors/spawn.h"

namespace abg::actors {
namespace {

struct data_server_state {
  data_server_state() = default; // not an aggregate: CAF would construct it from the actor pointer
  static inline const char* name = "abg.data_server";
  const config* cfg = nullptr;
  msg::data_listing listing;
  bool listed = false;
};

using data_pointer = msg::data_server_actor::stateful_pointer<data_server_state>;

caf::error refuse(std::string why) { return caf::make_error(caf::sec::invalid_argument, std::move(why)); }

// The listing, made once: every file read and checksummed.
caf::error ensure_listed(data_pointer self) {
  auto& st = self->state;
  if (st.listed) return caf::none;
  auto files = storage::list_dataset_files(*st.cfg);
  if (!files) return refuse("the coordinator's node cannot list its data: " + files.error().message);
  st.listing.files = std::move(*files);
  st.listed = true;
  return caf::none;
}

msg::data_server_actor::behavior_type data_server(data_pointer self, const config* cfg, msg::data_listing listing) {
  self->state.cfg = cfg;
  self->state.listing = std::move(listing);
  return {
      [self](msg::list_atom) -> caf::result<msg::data_listing> {
        if (auto err = ensure_listed(self)) return err;
        return self->state.listing;
      },
      [self](msg::read_atom, uint32_t index, uint64_t offset) -> caf::result<std::vector<char>> {
        if (auto err = ensure_listed(self)) return err;
        const auto& files = self->state.listing.files;
        if (index >= files.size())
          return refuse(fmt::format("data file {} does not exist (the listing has {})", index, files.size()));
        const auto& f = files[index];
        if (offset > f.bytes)
          return refuse(fmt::format("offset {} is past the end of {} ({} bytes)", offset, f.name, f.bytes));
        const auto path = storage::dataset_root(*self->state.cfg, f.root) / f.name;
        std::vector<char> out(static_cast<std::size_t>(std::min(msg::data_chunk_bytes, f.bytes - offset)));
        int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
        if (fd < 0) return refuse(fmt::format("cannot read {}: {}", path.string(), std::strerror(errno)));
        std::size_t done = 0;
        while (done < out.size()) {
          auto n = ::pread(fd, out.data() + done, out.size() - done, static_cast<off_t>(offset + done));
          if (n < 0 && errno == EINTR) continue;
          if (n <= 0) break;
          done += static_cast<std::size_t>(n);
        }
        ::close(fd);
        // The file changed since it was listed (an import into the coordinator's data while it runs).
        if (done < out.size())
          return refuse(fmt::format("{} is shorter than when it was listed; the coordinator's data changed", path.string()));
        return out;
      },
  };
}

}  // namespace

msg::data_server_actor spawn_data_server(caf::actor_system& sys, const config& cfg, msg::data_listing listing) {
  return sys.spawn<caf::detached>(data_server, &cfg, std::move(listing));
}

}  // namespace abg::actors
