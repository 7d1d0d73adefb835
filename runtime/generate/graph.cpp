#include "abg/generate/graph.h"

#include <charconv>
#include <cmath>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>

#include <fmt/format.h>

#include "abg/storage/tensor_file.h"
#include "runtime/generate/ordered_blocks.h"

namespace abg::generate {

namespace {

// Ids up to 2^40 and 2^20 relations keep names short; the limits are far
// above what one machine can train and leave room in 64-bit arithmetic.
constexpr std::uint64_t max_entities = std::uint64_t{1} << 40;
constexpr std::uint64_t max_relations = std::uint64_t{1} << 20;
constexpr std::uint64_t max_edges = std::uint64_t{1} << 50;

// The longest line: two entity names of 14 bytes (e + 13 digits: ids below
// 2^40), a relation name of 8 (r + 7 digits: below 2^20), two tabs, a newline.
constexpr std::size_t max_line = 14 + 1 + 8 + 1 + 14 + 1;

char* write_name(char* out, char prefix, std::uint64_t id) {
  *out++ = prefix;
  return std::to_chars(out, out + 20, id).ptr;
}

void append_name(std::string& out, char prefix, std::uint64_t id) {
  char buffer[24];
  out.append(buffer, write_name(buffer, prefix, id));
}

} // namespace

expected<void> check(const graph_spec& spec) {
  if (spec.entities < 2 || spec.entities > max_entities)
    return fail("--entities {}: give between 2 and {} entities", spec.entities, max_entities);
  if (spec.relations < 1 || spec.relations > max_relations)
    return fail("--relations {}: give between 1 and {} relations", spec.relations, max_relations);
  if (spec.edges < 1 || spec.edges > max_edges)
    return fail("--edges {}: give between 1 and {} edges", spec.edges, max_edges);
  if (!(spec.power_law >= 0.0) || spec.power_law > 10.0)
    return fail("--power-law {}: give an exponent between 0 (uniform) and 10 (0.5 to 1.5 is typical of real graphs)",
                spec.power_law);
  return {};
}

graph_generator::graph_generator(const graph_spec& spec)
    : spec_(spec), entity_rank_(spec.entities, spec.power_law),
      ids_(spec.entities, mix64(spec.seed ^ 0x5851f42d4c957f2dULL)) {
  relation_cdf_.resize(spec.relations);
  double sum = 0;
  for (std::uint64_t k = 0; k < spec.relations; ++k)
    relation_cdf_[k] = sum += std::pow(static_cast<double>(k + 1), -spec.power_law);
  for (auto& c : relation_cdf_)
    c /= sum;
  relation_cdf_.back() = 1.0;
}

std::uint64_t graph_generator::block_size(std::uint64_t block) const {
  const auto first = block * block_edges;
  return first >= spec_.edges ? 0 : std::min(block_edges, spec_.edges - first);
}

void append_entity_name(std::string& out, std::uint64_t id) { append_name(out, 'e', id); }
void append_relation_name(std::string& out, std::uint64_t id) { append_name(out, 'r', id); }

namespace {

// A block's text and its length.
struct text_block {
  std::unique_ptr<char[]> text;
  std::size_t size = 0;
};

} // namespace

expected<tsv_report> write_tsv(const graph_spec& spec, const std::filesystem::path& path, unsigned threads,
                               const std::function<void(std::uint64_t)>& progress) {
  if (auto ok = check(spec); !ok)
    return std::unexpected(ok.error());
  const auto start = std::chrono::steady_clock::now();
  const bool to_stdout = path == "-";
  std::optional<storage::atomic_file_writer> file;
  if (!to_stdout) {
    auto created = storage::atomic_file_writer::create(path);
    if (!created)
      return std::unexpected(created.error());
    file.emplace(std::move(*created));
  }
  graph_generator g(spec);
  tsv_report report;
  std::optional<error> failed;
  {
    ordered_blocks<text_block> blocks(
      g.blocks(), threads, [] { return text_block{std::make_unique_for_overwrite<char[]>(block_edges * max_line)}; },
      [&g](std::uint64_t b, text_block& out) {
        char* at = out.text.get();
        g.for_each_edge(b, [&](const edge& e) {
          at = write_name(at, 'e', e.head);
          *at++ = '\t';
          at = write_name(at, 'r', e.relation);
          *at++ = '\t';
          at = write_name(at, 'e', e.tail);
          *at++ = '\n';
        });
        out.size = static_cast<std::size_t>(at - out.text.get());
      });
    blocks.for_each([&](std::uint64_t b, const text_block& block) {
      const std::string_view text(block.text.get(), block.size);
      if (to_stdout) {
        if (std::fwrite(text.data(), 1, text.size(), stdout) != text.size())
          failed = error{fmt::format("writing to standard output failed: {}", std::strerror(errno))};
      } else if (auto ok = file->write(text); !ok) {
        failed = ok.error();
      }
      report.edges += g.block_size(b);
      report.bytes += text.size();
      if (progress && !failed)
        progress(report.edges);
      return !failed;
    });
  }
  if (failed)
    return std::unexpected(*failed); // the temporary file is removed with the writer
  if (to_stdout) {
    if (std::fflush(stdout) != 0)
      return fail("writing to standard output failed: {}", std::strerror(errno));
  } else if (auto ok = file->commit(); !ok) {
    return std::unexpected(ok.error());
  }
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return report;
}

} // namespace abg::generate
