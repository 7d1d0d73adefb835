// Partition server: stores partitions (embeddings + row-wise optimizer state)
// by (entity type, part); serves them as explicitly requested row chunks.
#include <algorithm>
#include <cstring>
#include <map>

#include "actors/interfaces.h"

namespace abg::actors {
namespace {

struct stored_partition {
  tensor embeddings;   // [rows, dim]
  tensor optim_state;  // [rows]
};

struct pending_put {
  uint64_t total_rows = 0;
  uint64_t next_row = 0;
  int64_t dim = 0;
  std::vector<float> embeddings;
  std::vector<float> optim_state;
};

struct partition_server_state {
  partition_server_state() = default;  // not an aggregate: CAF would construct it from the actor pointer
  static inline const char* name = "abg.partition_server";
  std::map<partition_key, stored_partition> stored;
  std::map<partition_key, pending_put> pending;
  std::string label;
};

constexpr uint64_t kMaxRows = uint64_t{1} << 34;

caf::error bad(std::string why) { return caf::make_error(caf::sec::invalid_argument, std::move(why)); }

partition_server_actor::behavior_type partition_server(
    partition_server_actor::stateful_pointer<partition_server_state> self, std::string label) {
  self->state.label = std::move(label);
  return {
      [self](msg::get_atom, const partition_key& key, uint64_t row_offset,
             uint64_t max_rows) -> caf::result<partition_chunk> {
        auto it = self->state.stored.find(key);
        if (it == self->state.stored.end()) return bad(self->state.label + ": unknown partition " + key.entity + "/" + std::to_string(key.part));
        const auto& p = it->second;
        const auto rows = static_cast<uint64_t>(p.embeddings.shape[0]);
        const auto dim = static_cast<uint64_t>(p.embeddings.shape[1]);
        if (row_offset > rows || max_rows == 0) return bad("bad chunk request");
        const uint64_t n = std::min(max_rows, rows - row_offset);
        partition_chunk c;
        c.key = key;
        c.row_offset = row_offset;
        c.total_rows = rows;
        if (row_offset == 0 && n == rows) {  // whole partition: share, no copy
          c.embeddings = p.embeddings;
          c.optim_state = p.optim_state;
          return c;
        }
        const float* e = p.embeddings.data->data() + row_offset * dim;
        const float* s = p.optim_state.data->data() + row_offset;
        c.embeddings = tensor::make({static_cast<int64_t>(n), static_cast<int64_t>(dim)},
                                    std::vector<float>(e, e + n * dim));
        c.optim_state = tensor::make({static_cast<int64_t>(n)}, std::vector<float>(s, s + n));
        return c;
      },
      [self](msg::put_atom, const partition_chunk& c) -> caf::result<bool> {
        auto& st = self->state;
        // Validate the chunk completely before touching any state.
        if (c.embeddings.shape.size() != 2 || c.optim_state.shape.size() != 1) return bad("bad chunk shapes");
        const int64_t rows = c.embeddings.shape[0];
        const int64_t dim = c.embeddings.shape[1];
        if (rows < 0 || dim < 0 || c.optim_state.shape[0] != rows) return bad("chunk shapes disagree");
        if (c.embeddings.numel() != static_cast<uint64_t>(rows) * static_cast<uint64_t>(dim) ||
            c.optim_state.numel() != static_cast<uint64_t>(rows))
          return bad("chunk data does not match its shape");
        if (c.total_rows > kMaxRows || c.row_offset > c.total_rows ||
            static_cast<uint64_t>(rows) > c.total_rows - c.row_offset)
          return bad("chunk rows out of range");
        auto it = st.pending.find(c.key);
        if (c.row_offset == 0) {  // (re)start a put; a half-done earlier one is dropped
          if (it != st.pending.end()) st.pending.erase(it);
          if (c.total_rows == static_cast<uint64_t>(rows)) {  // one chunk: share, no copy
            st.stored[c.key] = {c.embeddings, c.optim_state};
            return true;
          }
          pending_put p;
          p.total_rows = c.total_rows;
          p.dim = dim;
          // one allocation for the whole partition (bounded by kMaxRows above)
          p.embeddings.reserve(c.total_rows * static_cast<uint64_t>(dim));
          p.optim_state.reserve(c.total_rows);
          it = st.pending.emplace(c.key, std::move(p)).first;
        } else if (it == st.pending.end()) {
          return bad("chunk without a first chunk");
        }
        auto& p = it->second;
        if (p.total_rows != c.total_rows || p.dim != dim || p.next_row != c.row_offset || rows == 0) {
          st.pending.erase(it);
          return bad("chunk out of order");
        }
        p.embeddings.insert(p.embeddings.end(), c.embeddings.data->begin(), c.embeddings.data->end());
        p.optim_state.insert(p.optim_state.end(), c.optim_state.data->begin(), c.optim_state.data->end());
        p.next_row += static_cast<uint64_t>(rows);
        if (p.next_row < p.total_rows) return false;
        const auto total = static_cast<int64_t>(p.total_rows);
        st.stored[c.key] = {tensor::make({total, p.dim}, std::move(p.embeddings)),
                            tensor::make({total}, std::move(p.optim_state))};
        st.pending.erase(it);
        return true;
      },
      [self](msg::status_atom) -> uint64_t { return self->state.stored.size(); },
  };
}

}  // namespace

partition_server_actor spawn_partition_server(caf::actor_system& sys, std::string label) {
  return sys.spawn(partition_server, std::move(label));
}

}  // namespace abg::actors
