// The graph generator: Zipf draws against their exact probabilities, the id
// permutation a bijection, graphs deterministic per seed and independent of
// the thread count, degrees as skewed as the exponent says, bad specs refused.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <vector>

#include "abg/generate/graph.h"
#include "abg/generate/permutation.h"
#include "abg/generate/zipf.h"
#include "tests/test_util.h"

namespace fs = std::filesystem;
using namespace abg::generate;

namespace {

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

} // namespace

TEST_CASE("zipf_sampler draws ranks with their exact probabilities") {
  for (double s : {0.0, 0.5, 1.0, 1.5}) {
    CAPTURE(s);
    constexpr std::uint64_t n = 50;
    constexpr int draws = 400000;
    zipf_sampler z(n, s);
    splitmix64 rng(7);
    std::vector<int> count(n);
    for (int i = 0; i < draws; ++i) {
      auto k = z(rng);
      REQUIRE(k < n);
      ++count[k];
    }
    // Every rank within 5 standard deviations of its expected count.
    for (std::uint64_t k = 0; k < n; ++k) {
      CAPTURE(k);
      const double p = z.probability(k);
      const double expected = p * draws, sd = std::sqrt(draws * p * (1 - p));
      CHECK(std::abs(count[k] - expected) < 5 * sd + 1);
    }
  }
  splitmix64 rng(1);
  zipf_sampler one(1, 0.8);
  for (int i = 0; i < 100; ++i)
    CHECK(one(rng) == 0);
  // Ten billion ranks: still constant memory, in range, rank 0 the most drawn.
  zipf_sampler huge(10'000'000'000ULL, 0.8);
  std::map<std::uint64_t, int> seen;
  for (int i = 0; i < 100000; ++i) {
    auto k = huge(rng);
    REQUIRE(k < 10'000'000'000ULL);
    if (k < 3) ++seen[k];
  }
  CHECK(seen[0] > seen[1]);
  CHECK(seen[1] > seen[2]);
  CHECK_THROWS_AS(zipf_sampler(0, 1.0), std::invalid_argument);
  CHECK_THROWS_AS(zipf_sampler(5, -1.0), std::invalid_argument);
}

TEST_CASE("permutation is a bijection of [0, n) that depends on its seed") {
  for (std::uint64_t n : {1ULL, 2ULL, 3ULL, 1000ULL, 4096ULL, 4097ULL, 65537ULL}) {
    CAPTURE(n);
    permutation p(n, 42);
    std::vector<bool> hit(n);
    for (std::uint64_t x = 0; x < n; ++x) {
      auto y = p(x);
      REQUIRE(y < n);
      CHECK_FALSE(hit[y]);
      hit[y] = true;
    }
  }
  permutation a(100000, 1), b(100000, 2);
  int same = 0;
  for (std::uint64_t x = 0; x < 1000; ++x) same += a(x) == b(x);
  CHECK(same < 10);
  // Popular ranks are scattered, not kept at the lowest ids.
  std::uint64_t low = 0;
  for (std::uint64_t x = 0; x < 100; ++x) low += a(x) < 1000;
  CHECK(low < 10);
}

TEST_CASE("a generated graph depends on its spec and seed only, and its degrees follow the exponent") {
  abg::test::scratch_dir dir;
  graph_spec spec{.entities = 100000, .edges = 600000, .relations = 7, .power_law = 0.8, .seed = 5};
  auto one = write_tsv(spec, dir / "one.tsv", 1);
  auto three = write_tsv(spec, dir / "three.tsv", 3);
  REQUIRE(one);
  REQUIRE(three);
  CHECK(one->edges == 600000);
  const auto text = slurp(dir / "one.tsv");
  CHECK(text == slurp(dir / "three.tsv"));
  CHECK(one->bytes == text.size());
  auto other = spec;
  other.seed = 6;
  REQUIRE(write_tsv(other, dir / "other.tsv", 2));
  CHECK(slurp(dir / "other.tsv") != text);

  // Every line: e{id}<TAB>r{id}<TAB>e{id}, ids in range, no self-loop.
  std::istringstream in(text);
  std::map<std::uint64_t, std::uint64_t> degree;
  std::set<std::uint64_t> relations;
  std::uint64_t lines = 0;
  for (std::string line; std::getline(in, line); ++lines) {
    auto t1 = line.find('\t'), t2 = line.find('\t', t1 + 1);
    REQUIRE(t2 != std::string::npos);
    REQUIRE(line[0] == 'e');
    REQUIRE(line[t1 + 1] == 'r');
    REQUIRE(line[t2 + 1] == 'e');
    auto head = std::stoull(line.substr(1, t1 - 1)), tail = std::stoull(line.substr(t2 + 2));
    auto rel = std::stoull(line.substr(t1 + 2, t2 - t1 - 2));
    REQUIRE(head < spec.entities);
    REQUIRE(tail < spec.entities);
    REQUIRE(rel < spec.relations);
    CHECK(head != tail);
    ++degree[head];
    ++degree[tail];
    relations.insert(rel);
  }
  CHECK(lines == spec.edges);
  CHECK(relations.size() == spec.relations);
  // The top 1% of entities by degree hold about (1000^0.2 - 1) / (100000^0.2 - 1)
  // = 33% of the edge ends (the integral of k^-0.8); uniform ranks would give 1%.
  std::vector<std::uint64_t> degrees;
  for (auto& [id, d] : degree) degrees.push_back(d);
  std::sort(degrees.rbegin(), degrees.rend());
  std::uint64_t top = 0;
  for (std::size_t i = 0; i < 1000 && i < degrees.size(); ++i) top += degrees[i];
  const double share = static_cast<double>(top) / (2.0 * static_cast<double>(spec.edges));
  CHECK(share > 0.28);
  CHECK(share < 0.40);
}

TEST_CASE("bad specs are refused naming the option; a failed write leaves no file") {
  auto message = [](graph_spec s) {
    auto ok = check(s);
    REQUIRE_FALSE(ok);
    return ok.error().message;
  };
  CHECK(message({.entities = 1, .edges = 10}).find("--entities 1") != std::string::npos);
  CHECK(message({.entities = 10, .edges = 0}).find("--edges 0") != std::string::npos);
  CHECK(message({.entities = 10, .edges = 10, .relations = 0}).find("--relations 0") != std::string::npos);
  CHECK(message({.entities = 10, .edges = 10, .power_law = -1}).find("--power-law -1") != std::string::npos);
  CHECK(message({.entities = 10, .edges = 10, .power_law = NAN}).find("--power-law") != std::string::npos);
  abg::test::scratch_dir dir;
  auto bad = write_tsv({.entities = 10, .edges = 10}, dir / "missing" / "out.tsv", 1);
  CHECK_FALSE(bad);
  CHECK_FALSE(fs::exists(dir / "missing"));
}
