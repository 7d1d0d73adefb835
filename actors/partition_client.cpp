#include "actors/partition_client.h"

#include <algorithm>
#include <deque>
#include <optional>

#include <fmt/format.h>

namespace abg::actors {

namespace {

std::uint64_t rows_per_chunk(std::int64_t dim) {
  return std::max<std::uint64_t>(1, partition_chunk_bytes / (4 * static_cast<std::uint64_t>(std::max<std::int64_t>(dim, 1))));
}

} // namespace

expected<fetched_table> fetch_table(caf::actor_system& sys, const msg::partition_server_actor& server,
                                    const msg::partition_key& key, std::uint64_t min_version, caf::timespan deadline) {
  caf::scoped_actor self{sys};
  fetched_table out;
  std::int64_t dim = -1;
  std::uint64_t total = 0, version = 0;
  std::optional<error> failure;
  auto ask = [&](std::uint64_t row, std::uint64_t rows) {
    return self->request(server, deadline, msg::get_atom::value, key, min_version, row, rows);
  };
  // Copies a chunk straight into the table, allocated once the first chunk
  // gives its size (no growing buffers, no second copy).
  auto take = [&](std::uint64_t expected_row, msg::partition_chunk& c) {
    const auto n = c.embeddings.shape.empty() ? 0 : c.embeddings.shape[0];
    const auto d = c.embeddings.shape.size() == 2 ? c.embeddings.shape[1] : 0;
    if (dim < 0) {
      total = c.total_rows;
      dim = d;
      version = c.version;
      out.table = model::allocate_table(static_cast<std::int64_t>(total), dim);
    }
    if (c.total_rows != total || d != dim || c.version != version || c.row_offset != expected_row ||
        expected_row + static_cast<std::uint64_t>(n) > total ||
        c.embeddings.numel() != static_cast<std::size_t>(n * d) ||
        c.optim_state.numel() != static_cast<std::size_t>(n) || (n == 0 && expected_row < total)) {
      failure = error{fmt::format("partition server sent a chunk of {} that does not fit the partition",
                                  msg::to_string(key))};
      return;
    }
    std::copy(c.embeddings.data->begin(), c.embeddings.data->end(),
              out.table.embeddings.data_ptr<float>() + expected_row * static_cast<std::uint64_t>(dim));
    std::copy(c.optim_state.data->begin(), c.optim_state.data->end(), out.table.state.data_ptr<float>() + expected_row);
  };
  auto on_error = [&](caf::error& e) {
    failure = error{fmt::format("cannot get partition {}: {}", msg::to_string(key), sys.render(e))};
  };
  // The first chunk tells the size; a row is at most 4 KiB for dimensions up to 1024.
  std::uint64_t first_rows = std::max<std::uint64_t>(1, partition_chunk_bytes / 4096);
  ask(0, first_rows).receive([&](msg::partition_chunk& c) { take(0, c); }, on_error);
  if (failure)
    return std::unexpected(*failure);
  const auto step = rows_per_chunk(dim);
  std::uint64_t next = std::min(first_rows, total), received = next;
  std::deque<std::pair<std::uint64_t, decltype(ask(0, 1))>> in_flight;
  while (!failure && received < total) {
    while (next < total && in_flight.size() < static_cast<std::size_t>(partition_chunks_in_flight)) {
      in_flight.emplace_back(next, ask(next, step));
      next += std::min(step, total - next);
    }
    auto [row, handle] = std::move(in_flight.front());
    in_flight.pop_front();
    handle.receive([&, row = row](msg::partition_chunk& c) { take(row, c); }, on_error);
    if (!failure)
      received = row + std::min(step, total - row);
  }
  // Replies still on their way after a failure are dropped with the scoped actor.
  if (failure)
    return std::unexpected(*failure);
  out.version = version;
  return out;
}

expected<void> store_table(caf::actor_system& sys, const msg::partition_server_actor& server,
                           const msg::partition_key& key, const model::table& t, std::uint64_t version,
                           std::uint64_t base_version, caf::timespan deadline) {
  caf::scoped_actor self{sys};
  auto emb = t.embeddings.contiguous();
  auto state = t.state.contiguous();
  const auto rows = static_cast<std::uint64_t>(emb.size(0));
  const auto dim = static_cast<std::uint64_t>(emb.size(1));
  const auto step = rows_per_chunk(static_cast<std::int64_t>(dim));
  const float* e = emb.data_ptr<float>();
  const float* s = state.data_ptr<float>();
  std::optional<error> failure;
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
    return self->request(server, deadline, msg::put_atom::value, std::move(c));
  };
  // Chunks arrive in the order sent (CAF keeps the order between two actors);
  // the acknowledgements are awaited a few chunks behind.
  std::vector<std::uint64_t> starts; // an empty partition is one empty chunk
  for (std::uint64_t first = 0; first < rows || starts.empty(); first += step)
    starts.push_back(first);
  std::deque<decltype(put(0))> in_flight;
  std::size_t sent = 0;
  bool complete = false;
  while (!failure && (sent < starts.size() || !in_flight.empty())) {
    while (sent < starts.size() && in_flight.size() < static_cast<std::size_t>(partition_chunks_in_flight))
      in_flight.push_back(put(starts[sent++]));
    auto handle = std::move(in_flight.front());
    in_flight.pop_front();
    handle.receive([&](bool done) { complete = done; },
                   [&](caf::error& err) {
                     failure = error{fmt::format("cannot put partition {}: {}", msg::to_string(key), sys.render(err))};
                   });
  }
  if (failure)
    return std::unexpected(*failure);
  if (!complete)
    return fail("partition server did not complete partition {} after its last chunk", msg::to_string(key));
  return {};
}

} // namespace abg::actors
