#include "actors/partition_client.h"

#include <algorithm>
#include <optional>

#include <fmt/format.h>

#include "actors/blocking_peer.h"

namespace abg::actors {

namespace {

std::uint64_t rows_per_chunk(std::int64_t dim) {
  return std::max<std::uint64_t>(1, partition_chunk_bytes / (4 * static_cast<std::uint64_t>(std::max<std::int64_t>(dim, 1))));
}

} // namespace

expected<fetched_table> fetch_table(caf::actor_system& sys, const msg::partition_server_actor& server,
                                    const msg::partition_key& key, std::uint64_t min_version, caf::timespan deadline,
                                    const std::atomic<bool>* stop) {
  blocking_peer peer(sys, server, deadline, stop);
  const auto what = fmt::format("cannot get partition {}", msg::to_string(key));
  fetched_table out;
  std::int64_t dim = -1;
  std::uint64_t total = 0;
  // Copies a chunk straight into the table, allocated once the first chunk
  // gives its size (no growing buffers, no second copy).
  auto take = [&](std::uint64_t expected_row, const msg::partition_chunk& c) -> expected<void> {
    const auto n = c.embeddings.shape.empty() ? 0 : c.embeddings.shape[0];
    const auto d = c.embeddings.shape.size() == 2 ? c.embeddings.shape[1] : 0;
    if (dim < 0) {
      total = c.total_rows;
      dim = d;
      out.version = c.version;
      out.table = model::allocate_table(static_cast<std::int64_t>(total), dim);
    }
    if (c.total_rows != total || d != dim || c.version != out.version || c.row_offset != expected_row ||
        expected_row + static_cast<std::uint64_t>(n) > total ||
        c.embeddings.numel() != static_cast<std::size_t>(n * d) ||
        c.optim_state.numel() != static_cast<std::size_t>(n) || (n == 0 && expected_row < total))
      return fail("partition server sent a chunk of {} that does not fit the partition", msg::to_string(key));
    std::copy(c.embeddings.data->begin(), c.embeddings.data->end(),
              out.table.embeddings.data_ptr<float>() + expected_row * static_cast<std::uint64_t>(dim));
    std::copy(c.optim_state.data->begin(), c.optim_state.data->end(), out.table.state.data_ptr<float>() + expected_row);
    return {};
  };
  // The first chunk tells the size; a row is at most 4 KiB for dimensions up to 1024.
  const std::uint64_t first_rows = std::max<std::uint64_t>(1, partition_chunk_bytes / 4096);
  auto first = peer.ask<msg::partition_chunk>(what, msg::get_atom::value, key, min_version, uint64_t{0}, first_rows);
  if (!first)
    return std::unexpected(first.error());
  if (auto ok = take(0, *first); !ok)
    return std::unexpected(ok.error());
  const auto step = rows_per_chunk(dim);
  // The rest, several chunks in flight; the answers come in the order asked.
  std::vector<std::uint64_t> starts;
  for (std::uint64_t row = std::min(first_rows, total); row < total; row += step)
    starts.push_back(row);
  std::size_t sent = 0;
  for (std::size_t done = 0; done < starts.size(); ++done) {
    while (sent < starts.size() && sent - done < static_cast<std::size_t>(partition_chunks_in_flight)) {
      peer.send(msg::get_atom::value, key, min_version, starts[sent], step);
      ++sent;
    }
    auto c = peer.template next<msg::partition_chunk>(what);
    if (!c)
      return std::unexpected(c.error());
    if (auto ok = take(starts[done], *c); !ok)
      return std::unexpected(ok.error());
  }
  return out;
}

expected<void> store_table(caf::actor_system& sys, const msg::partition_server_actor& server,
                           const msg::partition_key& key, const model::table& t, std::uint64_t version,
                           std::uint64_t base_version, caf::timespan deadline, const std::atomic<bool>* stop) {
  blocking_peer peer(sys, server, deadline, stop);
  const auto what = fmt::format("cannot put partition {}", msg::to_string(key));
  auto emb = t.embeddings.contiguous();
  auto state = t.state.contiguous();
  const auto rows = static_cast<std::uint64_t>(emb.size(0));
  const auto dim = static_cast<std::uint64_t>(emb.size(1));
  const auto step = rows_per_chunk(static_cast<std::int64_t>(dim));
  const float* e = emb.data_ptr<float>();
  const float* s = state.data_ptr<float>();
  auto put = [&](std::uint64_t first) {
    auto n = std::min(step, rows - first);
    msg::partition_chunk c;
    c.key = key;
    c.version = version;
    c.base_version = base_version;
    c.row_offset = first;
    c.total_rows = rows;
    c.embeddings = msg::tensor::make({static_cast<std::int64_t>(n), static_cast<std::int64_t>(dim)},
                                     std::vector<float>(e + first * dim, e + (first + n) * dim));
    c.optim_state = msg::tensor::make({static_cast<std::int64_t>(n)}, std::vector<float>(s + first, s + first + n));
    peer.send(msg::put_atom::value, std::move(c));
  };
  std::vector<std::uint64_t> starts; // an empty partition is one empty chunk
  for (std::uint64_t first = 0; first < rows || starts.empty(); first += step)
    starts.push_back(first);
  // Chunks arrive in the order sent; the acknowledgements are awaited a few chunks behind.
  std::size_t sent = 0;
  bool complete = false;
  for (std::size_t done = 0; done < starts.size(); ++done) {
    while (sent < starts.size() && sent - done < static_cast<std::size_t>(partition_chunks_in_flight))
      put(starts[sent++]);
    auto ack = peer.template next<bool>(what);
    if (!ack)
      return std::unexpected(ack.error());
    complete = *ack;
  }
  if (!complete)
    return fail("partition server did not complete partition {} after its last chunk", msg::to_string(key));
  return {};
}

} // namespace abg::actors
