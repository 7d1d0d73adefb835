// The exporter: TSV and npy outputs read back and compared value for value
// with what the checkpoint holds (global embeddings added), names escaped.
#include <cstring>
#include <fstream>
#include <sstream>

#include <doctest/doctest.h>

#include "abg/storage/checkpoint.h"
#include "abg/storage/entity_store.h"
#include "abg/storage/export.h"
#include "tests/test_util.h"

namespace fs = std::filesystem;
using namespace abg::storage;
using abg::test::scratch_dir;

namespace {

std::vector<std::string> split(std::string_view text, char sep) {
  std::vector<std::string> out;
  std::size_t start = 0;
  for (std::size_t i = 0; i <= text.size(); ++i)
    if (i == text.size() || text[i] == sep) {
      out.emplace_back(text.substr(start, i - start));
      start = i + 1;
    }
  return out;
}

std::vector<std::string> lines_of(const fs::path& path) {
  auto text = read_file(path);
  REQUIRE(text);
  REQUIRE((text->empty() || text->back() == '\n'));
  auto lines = split(*text, '\n');
  lines.pop_back(); // after the last '\n'
  return lines;
}

std::vector<float> parse_floats(const std::vector<std::string>& fields, std::size_t first) {
  std::vector<float> out;
  for (auto i = first; i < fields.size(); ++i) {
    char* end = nullptr;
    out.push_back(std::strtof(fields[i].c_str(), &end));
    CHECK(*end == '\0');
  }
  return out;
}

// A minimal reader of NumPy format 1.0 '<f4' C-order files.
struct npy {
  std::vector<std::int64_t> shape;
  std::vector<float> data;
};

npy read_npy(const fs::path& path) {
  auto bytes = read_file(path);
  REQUIRE(bytes);
  auto& b = *bytes;
  REQUIRE(b.size() >= 10);
  REQUIRE(b.substr(0, 6) == "\x93NUMPY");
  CHECK(b[6] == 1);
  CHECK(b[7] == 0);
  auto len = static_cast<std::size_t>(static_cast<unsigned char>(b[8]) | static_cast<unsigned char>(b[9]) << 8);
  CHECK((10 + len) % 64 == 0);
  auto dict = b.substr(10, len);
  CHECK(dict.back() == '\n');
  CHECK(dict.find("'descr': '<f4'") != std::string::npos);
  CHECK(dict.find("'fortran_order': False") != std::string::npos);
  auto open = dict.find("'shape': (");
  REQUIRE(open != std::string::npos);
  auto close = dict.find(')', open);
  npy out;
  for (auto& dim : split(dict.substr(open + 10, close - open - 10), ','))
    if (dim.find_first_not_of(' ') != std::string::npos)
      out.shape.push_back(std::stoll(dim));
  std::size_t count = 1;
  for (auto d : out.shape)
    count *= static_cast<std::size_t>(d);
  REQUIRE(b.size() == 10 + len + count * 4);
  out.data.resize(count);
  std::memcpy(out.data.data(), b.data() + 10 + len, count * 4);
  return out;
}

std::vector<float> ramp(std::size_t n, float start) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i)
    v[i] = start + 0.1f * static_cast<float>(i) + 1e-7f * static_cast<float>(i * i);
  return v;
}

// An entity path, a config and a committed checkpoint, small enough to check by hand.
struct fixture {
  scratch_dir dir;
  abg::config cfg;
  dataset_id id = dataset_id::random();
  std::vector<std::vector<std::string>> names = {
    {"alice", "tab\there", "new\nline"}, {"back\\slash", "cr\rx"}, {"item one", "itém 2"}};
  std::vector<std::vector<float>> tables = {ramp(3 * 4, 1.0f), ramp(2 * 4, -2.0f), ramp(2 * 3, 5.0f)};
  std::vector<float> global_user = {0.5f, -0.25f, 1e-3f, 3.0f};
  std::vector<float> translation = ramp(4, 0.3f), diag = ramp(3, -0.7f);

  fixture() {
    cfg.entity_path = (dir / "entities").string();
    cfg.checkpoint_path = (dir / "model").string();
    cfg.dimension = 4;
    cfg.entities = {{"user", {.num_partitions = 2}}, {"item", {.num_partitions = 1, .dimension = 3}}};
    cfg.relations = {{.name = "follows", .lhs = "user", .rhs = "user", .operator_ = "translation"},
                     {.name = "likes", .lhs = "user", .rhs = "item", .operator_ = "diagonal"}};
    entity_store_meta meta{id, {{"user", {3, 2}}, {"item", {2}}}, {"follows", "likes"}, false};
    fs::create_directories(cfg.entity_path);
    REQUIRE(write_entity_meta(cfg.entity_path, meta));
    std::pair<std::string, std::int64_t> parts[] = {{"user", 0}, {"user", 1}, {"item", 0}};
    for (std::size_t k = 0; k < 3; ++k) {
      std::vector<std::string_view> views(names[k].begin(), names[k].end());
      REQUIRE(write_entity_names(cfg.entity_path, id, parts[k].first, parts[k].second, views));
    }
    auto w = checkpoint_writer::begin(cfg.checkpoint_path, 1, checkpoint_settings::from(cfg, id, "x = 1\n"));
    REQUIRE(w);
    REQUIRE(w->put_embeddings("user", 0, tables[0], 3, 4));
    REQUIRE(w->put_embeddings("user", 1, tables[1], 2, 4));
    REQUIRE(w->put_embeddings("item", 0, tables[2], 2, 3));
    REQUIRE(w->put_shared(relation_param_name(1, "rhs", "diagonal"), {3}, diag));
    REQUIRE(w->put_shared(relation_param_name(0, "rhs", "translation"), {4}, translation));
    REQUIRE(w->put_shared(optimizer_state_name(relation_param_name(0, "rhs", "translation")), {4}, translation));
    REQUIRE(w->put_shared(global_embedding_name("user"), {4}, global_user));
    REQUIRE(w->commit({}));
  }

  // What the export must hold for table k: the stored rows plus the type's global embedding.
  std::vector<float> expected_row(std::size_t k, std::size_t row) const {
    auto dim = k < 2 ? 4u : 3u;
    std::vector<float> out(tables[k].begin() + static_cast<std::ptrdiff_t>(row * dim),
                           tables[k].begin() + static_cast<std::ptrdiff_t>((row + 1) * dim));
    if (k < 2)
      for (std::size_t j = 0; j < dim; ++j)
        out[j] += global_user[j];
    return out;
  }
};

} // namespace

TEST_CASE("export: name escaping round-trips") {
  for (std::string name : {"plain", "tab\there", "new\nline", "cr\r", "back\\slash", "\\t literal", "", "ü\t\\\n"}) {
    auto escaped = escape_name(name);
    CHECK(escaped.find_first_of("\t\n\r") == std::string::npos);
    CHECK(unescape_name(escaped) == name);
  }
  CHECK(escape_name("a\tb\\c") == "a\\tb\\\\c");
}

TEST_CASE("export: npy header") {
  std::int64_t two[] = {3, 4}, one[] = {5};
  auto h = npy_header(two);
  CHECK(h.size() % 64 == 0);
  CHECK(h.find("'shape': (3, 4), }") != std::string::npos);
  CHECK(npy_header(one).find("'shape': (5,), }") != std::string::npos);
  CHECK(npy_header({}).find("'shape': (), }") != std::string::npos);
}

TEST_CASE("export: tsv reads back value for value") {
  fixture f;
  auto cwd = fs::current_path();
  fs::current_path(f.dir.path()); // the default outputs land in the working directory
  auto summary = export_checkpoint(f.cfg, {});
  fs::current_path(cwd);
  REQUIRE_MESSAGE(summary, (summary ? "" : summary.error().message));
  CHECK(summary->version == 1);
  CHECK(summary->entities == 7);
  CHECK(summary->relation_parameters == 2);

  auto lines = lines_of(f.dir / "entities.tsv");
  REQUIRE(lines.size() == 7);
  std::size_t line = 0;
  for (std::size_t k = 0; k < 3; ++k)
    for (std::size_t row = 0; row < f.names[k].size(); ++row, ++line) {
      auto fields = split(lines[line], '\t');
      CHECK(unescape_name(fields[0]) == f.names[k][row]);
      CHECK(parse_floats(fields, 1) == f.expected_row(k, row));
    }
  CHECK(lines[1].starts_with("tab\\there\t"));

  auto rel = lines_of(f.dir / "relation_types.tsv");
  REQUIRE(rel.size() == 2);
  auto first = split(rel[0], '\t'), second = split(rel[1], '\t');
  CHECK(std::vector(first.begin(), first.begin() + 5) ==
        std::vector<std::string>{"follows", "rhs", "translation", "translation", "4"});
  CHECK(parse_floats(first, 5) == f.translation);
  CHECK(std::vector(second.begin(), second.begin() + 5) ==
        std::vector<std::string>{"likes", "rhs", "diagonal", "diagonal", "3"});
  CHECK(parse_floats(second, 5) == f.diag);

  SUBCASE("existing outputs are refused before anything is written") {
    abg::storage::export_options o;
    o.entities_output = f.dir / "fresh.tsv";
    o.relation_types_output = f.dir / "relation_types.tsv";
    auto again = export_checkpoint(f.cfg, o);
    REQUIRE_FALSE(again);
    CHECK(again.error().message.find("relation_types.tsv already exists; remove it or pass --force") !=
          std::string::npos);
    CHECK_FALSE(fs::exists(f.dir / "fresh.tsv"));
    o.force = true;
    REQUIRE(export_checkpoint(f.cfg, o));
    CHECK(lines_of(f.dir / "fresh.tsv") == lines);
  }
  SUBCASE("a version that does not exist") {
    abg::storage::export_options o;
    o.entities_output = f.dir / "v9.tsv";
    o.relation_types_output = f.dir / "v9-rel.tsv";
    o.version = 9;
    auto r = export_checkpoint(f.cfg, o);
    REQUIRE_FALSE(r);
    CHECK(r.error().message.find("checkpoint version 9 does not exist") != std::string::npos);
  }
  SUBCASE("a config with another schema") {
    auto other = f.cfg;
    other.entities[1].second.dimension = 5;
    abg::storage::export_options o;
    o.entities_output = f.dir / "x.tsv";
    o.relation_types_output = f.dir / "y.tsv";
    auto r = export_checkpoint(other, o);
    REQUIRE_FALSE(r);
    CHECK(r.error().message.find("entity type 'item': dimension was 3, now 5") != std::string::npos);
  }
}

TEST_CASE("export: npy reads back value for value") {
  fixture f;
  abg::storage::export_options o;
  o.format = export_format::npy;
  o.entities_output = f.dir / "out";
  auto summary = export_checkpoint(f.cfg, o);
  REQUIRE_MESSAGE(summary, (summary ? "" : summary.error().message));
  CHECK(summary->entities == 7);
  std::pair<std::string, int> parts[] = {{"user", 0}, {"user", 1}, {"item", 0}};
  for (std::size_t k = 0; k < 3; ++k) {
    auto base = fmt::format("{}_{}", parts[k].first, parts[k].second);
    auto array = read_npy(f.dir / "out" / fmt::format("embeddings_{}.npy", base));
    auto dim = k < 2 ? 4 : 3;
    CHECK(array.shape == std::vector<std::int64_t>{static_cast<std::int64_t>(f.names[k].size()), dim});
    auto names = lines_of(f.dir / "out" / fmt::format("names_{}.txt", base));
    REQUIRE(names.size() == f.names[k].size());
    for (std::size_t row = 0; row < names.size(); ++row) {
      CHECK(unescape_name(names[row]) == f.names[k][row]);
      auto d = static_cast<std::size_t>(dim);
      CHECK(std::vector(array.data.begin() + static_cast<std::ptrdiff_t>(row * d),
                        array.data.begin() + static_cast<std::ptrdiff_t>((row + 1) * d)) == f.expected_row(k, row));
    }
  }
  auto translation = read_npy(f.dir / "out" / "relation_0_rhs_translation.npy");
  CHECK(translation.shape == std::vector<std::int64_t>{4});
  CHECK(translation.data == f.translation);
  CHECK(read_npy(f.dir / "out" / "relation_1_rhs_diagonal.npy").data == f.diag);
  auto index = lines_of(f.dir / "out" / "relation_types.tsv");
  REQUIRE(index.size() == 3);
  CHECK(index[0] == "id\tname\tside\toperator\tparam\tshape\tfile");
  CHECK(index[1] == "0\tfollows\trhs\ttranslation\ttranslation\t4\trelation_0_rhs_translation.npy");
  CHECK(index[2] == "1\tlikes\trhs\tdiagonal\tdiagonal\t3\trelation_1_rhs_diagonal.npy");

  auto again = export_checkpoint(f.cfg, o);
  REQUIRE_FALSE(again);
  CHECK(again.error().message.find("already exists") != std::string::npos);
  o.force = true;
  CHECK(export_checkpoint(f.cfg, o));
}
