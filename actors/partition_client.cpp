#include "actors/partition_client.h"

#include <algorithm>
#include <limits>
#include <optional>

#include <fmt/format.h>

#include "actors/blocking_peer.h"
#include "actors/node/secure_remoting.h"
#include "messages/bulk_wire.h"

namespace abg::actors {

namespace {

// Rows of `row_floats` floats each (embedding and optimizer state) per chunk.
std::uint64_t rows_per_chunk(std::int64_t row_floats) {
  return std::max<std::uint64_t>(
    1, partition_chunk_bytes / (4 * static_cast<std::uint64_t>(std::max<std::int64_t>(row_floats, 1))));
}

std::chrono::milliseconds idle_of(caf::timespan deadline) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(deadline);
}

// A server in this process: a message shares the tables' memory, so a
// partition travels as one chunk (no chunking needed to bound a frame). A
// put of a whole table is kept as it is; chunks would be copied into a new
// table, and writing fresh pages costs more than the copy itself.
bool in_process(caf::actor_system& sys, const partition_server_ref& ref) { return ref.actor.node() == sys.node(); }

std::uint8_t purpose_code(traffic::kind k) { return k == traffic::kind::checkpoints ? 1 : 0; }

// What a swap moves as the schedule sees it: rows x (dimension + state
// width) floats.
void count_implied(traffic::kind purpose, std::uint64_t rows, std::int64_t dim, std::int64_t state_width) {
  if (purpose == traffic::kind::swaps)
    traffic::count_implied_swaps(rows * static_cast<std::uint64_t>(dim + state_width) * sizeof(float));
}

// The bulk channel: the rows go from the socket into the table's memory.
// A bulk channel to `endpoint`, through this process's gate's token.
expected<msg::bulk::channel> connect_bulk(caf::actor_system& sys, const std::string& endpoint, caf::timespan deadline,
                                          const std::atomic<bool>* stop) {
  auto* g = gate_of(sys);
  if (!g) return fail("bulk channel to {}: this process has no cluster token", endpoint);
  return msg::bulk::channel::connect(endpoint, g->token().key, idle_of(deadline), stop, g->tls());
}

// Sends a get over the bulk channel and reads the server's verdict.
expected<msg::bulk::reply> bulk_get(msg::bulk::channel& ch, const msg::partition_key& key, std::uint64_t min_version,
                                    traffic::kind purpose) {
  msg::bulk::request req;
  req.what = msg::bulk::request::op::get;
  req.entity = key.entity;
  req.part = key.part;
  req.version = min_version;
  req.purpose = purpose_code(purpose);
  if (auto ok = ch.send(req); !ok) return std::unexpected(ok.error());
  auto rep = ch.receive_reply();
  if (!rep) return rep;
  if (!rep->ok) return fail("{}", rep->error);
  return rep;
}

expected<fetched_table> bulk_fetch(caf::actor_system& sys, const std::string& endpoint, const msg::partition_key& key,
                                   std::uint64_t min_version, caf::timespan deadline, const std::atomic<bool>* stop,
                                   traffic::kind purpose) {
  const auto what = fmt::format("cannot get partition {}", msg::to_string(key));
  auto wrap = [&](error e) { return std::unexpected(error{what + ": " + e.message, e.lost_peer}); };
  auto connected = connect_bulk(sys, endpoint, deadline, stop);
  if (!connected) return wrap(connected.error());
  auto ch = std::move(*connected);
  traffic::bulk_meter meter(ch, purpose);
  auto rep = bulk_get(ch, key, min_version, purpose);
  if (!rep) return wrap(rep.error());
  fetched_table out;
  out.version = rep->version;
  const auto width = rep->elementwise_state ? rep->dim : 1;
  out.table = model::allocate_table(static_cast<std::int64_t>(rep->rows), rep->dim, width);
  if (auto ok = ch.receive_tensor(0, out.table.embeddings.data_ptr<float>(),
                                   rep->rows * static_cast<std::uint64_t>(rep->dim));
      !ok)
    return wrap(ok.error());
  if (auto ok = ch.receive_tensor(1, out.table.state.data_ptr<float>(), rep->state_count()); !ok)
    return wrap(ok.error());
  count_implied(purpose, rep->rows, rep->dim, width);
  return out;
}

expected<void> bulk_store(caf::actor_system& sys, const std::string& endpoint, const msg::partition_key& key, const model::table& t,
                          std::uint64_t version, std::uint64_t base_version, caf::timespan deadline,
                          const std::atomic<bool>* stop, traffic::kind purpose) {
  const auto what = fmt::format("cannot put partition {}", msg::to_string(key));
  auto wrap = [&](error e) { return std::unexpected(error{what + ": " + e.message, e.lost_peer}); };
  auto connected = connect_bulk(sys, endpoint, deadline, stop);
  if (!connected) return wrap(connected.error());
  auto ch = std::move(*connected);
  traffic::bulk_meter meter(ch, purpose);
  auto emb = t.embeddings.contiguous();
  auto state = t.state.contiguous();
  msg::bulk::request req;
  req.what = msg::bulk::request::op::put;
  req.entity = key.entity;
  req.part = key.part;
  req.version = version;
  req.base_version = base_version;
  req.rows = static_cast<std::uint64_t>(emb.size(0));
  req.dim = emb.size(1);
  req.purpose = purpose_code(purpose);
  req.elementwise_state = t.state_width() != 1;
  if (auto ok = ch.send(req); !ok) return wrap(ok.error());
  // The server accepts or refuses the put before any row travels.
  auto accepted = ch.receive_reply();
  if (!accepted) return wrap(accepted.error());
  if (!accepted->ok) return fail("{}: {}", what, accepted->error);
  const msg::bulk::rows_layout rows{req.rows, req.dim, t.state_width()};
  if (auto ok = ch.send_rows(rows, 0, rows.rows, emb.data_ptr<float>(), state.data_ptr<float>()); !ok)
    return wrap(ok.error());
  auto rep = ch.receive_reply();
  if (!rep) return wrap(rep.error());
  if (!rep->ok) return fail("{}: {}", what, rep->error);
  count_implied(purpose, req.rows, req.dim, t.state_width());
  return {};
}

} // namespace

const partition_server_ref& server_of(const std::vector<partition_server_ref>& servers, std::int64_t part) {
  return servers[static_cast<std::size_t>(part) % servers.size()];
}

expected<fetched_table> fetch_table(caf::actor_system& sys, const partition_server_ref& ref,
                                    const msg::partition_key& key, std::uint64_t min_version, caf::timespan deadline,
                                    const std::atomic<bool>* stop, traffic::kind purpose) {
  if (!ref.bulk.empty()) return bulk_fetch(sys, ref.bulk, key, min_version, deadline, stop, purpose);
  blocking_peer peer(sys, ref.actor, deadline, stop);
  const auto what = fmt::format("cannot get partition {}", msg::to_string(key));
  fetched_table out;
  std::int64_t dim = -1;
  std::int64_t width = 1; // optimizer state values per row
  std::uint64_t total = 0;
  // Copies a chunk straight into the table, allocated once the first chunk
  // gives its size (no growing buffers, no second copy).
  auto take = [&](std::uint64_t expected_row, const msg::partition_chunk& c) -> expected<void> {
    const auto n = c.embeddings.shape.empty() ? 0 : c.embeddings.shape[0];
    const auto d = c.embeddings.shape.size() == 2 ? c.embeddings.shape[1] : 0;
    const auto w = msg::state_width_of(c.optim_state);
    if (dim < 0) {
      total = c.total_rows;
      dim = d;
      width = w;
      out.version = c.version;
      out.table = model::allocate_table(static_cast<std::int64_t>(total), dim, width);
    }
    if (c.total_rows != total || d != dim || w != width || (width != 1 && width != dim) ||
        c.version != out.version || c.row_offset != expected_row ||
        expected_row + static_cast<std::uint64_t>(n) > total ||
        c.embeddings.numel() != static_cast<std::size_t>(n * d) ||
        c.optim_state.numel() != static_cast<std::size_t>(n * w) || (n == 0 && expected_row < total))
      return fail("partition server sent a chunk of {} that does not fit the partition", msg::to_string(key));
    std::copy(c.embeddings.values().begin(), c.embeddings.values().end(),
              out.table.embeddings.data_ptr<float>() + expected_row * static_cast<std::uint64_t>(dim));
    std::copy(c.optim_state.values().begin(), c.optim_state.values().end(),
              out.table.state.data_ptr<float>() + expected_row * static_cast<std::uint64_t>(width));
    return {};
  };
  // The first chunk tells the size; a row (embedding and element-wise
  // optimizer state) is at most 8 KiB for dimensions up to 1024. In one
  // process it is the whole partition, shared by the message and copied once.
  const std::uint64_t first_rows =
    in_process(sys, ref) ? std::numeric_limits<std::uint64_t>::max() : std::max<std::uint64_t>(1, partition_chunk_bytes / 8192);
  auto first = peer.ask<msg::partition_chunk>(what, msg::get_atom::value, key, min_version, uint64_t{0}, first_rows);
  if (!first)
    return std::unexpected(first.error());
  if (auto ok = take(0, *first); !ok)
    return std::unexpected(ok.error());
  const auto step = rows_per_chunk(dim + width);
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

expected<std::uint64_t> stream_table(caf::actor_system& sys, const partition_server_ref& ref,
                                     const msg::partition_key& key, std::uint64_t min_version, caf::timespan deadline,
                                     const table_sink& sink, traffic::kind purpose) {
  const auto what = fmt::format("cannot get partition {}", msg::to_string(key));
  auto wrap = [&](error e) { return std::unexpected(error{what + ": " + e.message, e.lost_peer}); };
  if (ref.bulk.empty()) return fail("{}: its partition server is in this process and has no bulk channel", what);
  auto connected = connect_bulk(sys, ref.bulk, deadline, nullptr);
  if (!connected) return wrap(connected.error());
  auto ch = std::move(*connected);
  traffic::bulk_meter meter(ch, purpose);
  auto rep = bulk_get(ch, key, min_version, purpose);
  if (!rep) return wrap(rep.error());
  const auto width = rep->elementwise_state ? rep->dim : 1;
  if (auto ok = sink.begin(rep->rows, rep->dim, width); !ok) return std::unexpected(ok.error());
  std::vector<float> buffer; // one chunk
  if (auto ok = ch.receive_tensor(0, rep->rows * static_cast<std::uint64_t>(rep->dim), buffer, sink.values); !ok)
    return wrap(ok.error());
  if (auto ok = ch.receive_tensor(1, rep->state_count(), buffer, sink.values); !ok) return wrap(ok.error());
  count_implied(purpose, rep->rows, rep->dim, width);
  return rep->version;
}

expected<void> store_table(caf::actor_system& sys, const partition_server_ref& ref,
                           const msg::partition_key& key, const model::table& t, std::uint64_t version,
                           std::uint64_t base_version, caf::timespan deadline, const std::atomic<bool>* stop,
                           traffic::kind purpose) {
  if (!ref.bulk.empty()) return bulk_store(sys, ref.bulk, key, t, version, base_version, deadline, stop, purpose);
  blocking_peer peer(sys, ref.actor, deadline, stop);
  const auto what = fmt::format("cannot put partition {}", msg::to_string(key));
  auto emb = t.embeddings.contiguous();
  auto state = t.state.contiguous();
  const auto rows = static_cast<std::uint64_t>(emb.size(0));
  const auto dim = static_cast<std::uint64_t>(emb.size(1));
  const auto width = t.state_width();
  const auto step = in_process(sys, ref) ? std::max<std::uint64_t>(rows, 1)
                                         : rows_per_chunk(static_cast<std::int64_t>(dim) + width);
  const float* e = emb.data_ptr<float>();
  const float* s = state.data_ptr<float>();
  // The chunks are views of the table (no copy); the caller no longer
  // modifies a table it has stored (a trainer drops it), so in one process
  // the partition server may keep them as they are.
  auto owner = std::make_shared<std::pair<torch::Tensor, torch::Tensor>>(emb, state);
  auto put = [&](std::uint64_t first) {
    auto n = std::min(step, rows - first);
    msg::partition_chunk c;
    c.key = key;
    c.version = version;
    c.base_version = base_version;
    c.row_offset = first;
    c.total_rows = rows;
    c.embeddings = msg::tensor::view({static_cast<std::int64_t>(n), static_cast<std::int64_t>(dim)}, owner,
                                     e + first * dim, n * dim);
    c.optim_state = msg::state_rows(owner, s, first, n, width);
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
