// Edge lists (`abg import`'s input: TSV or CSV, plain or gzip) through the
// whole importer: line splitting, weights, dynamic relations, two entity types
// in two partitions, buckets and dictionaries written and committed. The first
// input byte picks the column layout (bit 0: a weight column, bit 1: comma
// separated, bit 2: skip a header line), the rest is the file (zlib tells
// gzip from plain text itself, so gzip inputs are fuzzed too).
#include <cstdlib>

#include <zlib.h>

#include "abg/config.h"
#include "abg/import.h"
#include "tests/fuzz/fuzz_input.h"

using namespace abg;

namespace {

const config& import_config() {
  static const config c = [] {
    auto base = fuzz::scratch().string();
    auto loaded = parse_config(R"(entity_path = ")" + base + R"(/entities"
edge_paths = [")" + base + R"(/edges"]
checkpoint_path = ")" + base + R"(/model"
dimension = 4
dynamic_relations = true
[entities.user]
num_partitions = 2
[entities.item]
num_partitions = 1
[[relations]]
name = "all"
lhs = "user"
rhs = "item"
)",
                               "import_fuzz.toml");
    if (!loaded) std::abort();
    return loaded->value;
  }();
  return c;
}

std::string gzip(std::string_view text) {
  uLongf size = compressBound(static_cast<uLong>(text.size())) + 32;
  std::string out(size, '\0');
  z_stream z{};
  deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY); // 16: gzip header
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(text.data()));
  z.avail_in = static_cast<uInt>(text.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  deflate(&z, Z_FINISH);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

} // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  if (!fuzz::seeds_dir()) return 0;
  const std::string tsv = "alice\tlikes\tbook\nbob\tlikes\tfilm\n\ncarol\tknows\tbook\n";
  fuzz::write_seed("tsv", std::string("\x00", 1) + tsv);
  fuzz::write_seed("weighted", "\x01" "alice\tlikes\tbook\t0.5\nbob\tlikes\tfilm\t2e3\n");
  fuzz::write_seed("csv", "\x06" "head,rel,tail\nalice,likes,book\n\"bob\",likes,film\n");
  fuzz::write_seed("gzip", std::string("\x00", 1) + gzip(tsv));
  std::exit(0);
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  static const auto input = fuzz::scratch() / "input.tsv";
  fuzz::write_file(input, fuzz::as_text({data + 1, size - 1}));
  std::error_code ec;
  for (auto dir : {"entities", "edges", "model"}) std::filesystem::remove_all(fuzz::scratch() / dir, ec);
  import_options options;
  options.inputs = {input};
  options.lhs_col = 0;
  options.rel_col = 1;
  options.rhs_col = 2;
  if (data[0] & 1) options.weight_col = 3;
  if (data[0] & 2) options.delimiter = ',';
  options.skip_header = (data[0] & 4) != 0;
  options.strict = (data[0] & 8) != 0;
  (void)run_import(import_config(), options, {});
  return 0;
}
