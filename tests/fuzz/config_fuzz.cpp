// Config files (TOML, every key PBG knows), cluster files and token files,
// parsed and validated; a config that parses must print (to_toml) and parse
// back equal.
#include <cstdlib>
#include <filesystem>

#include "abg/cluster.h"
#include "abg/config.h"
#include "abg/token.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  if (!abg::fuzz::seeds_dir()) return 0;
  const std::filesystem::path configs = std::filesystem::path(ABG_FUZZ_ROOT) / "config";
  for (const auto& e : std::filesystem::directory_iterator(configs))
    abg::fuzz::write_seed(e.path().filename().string(), abg::fuzz::read_all(e.path()));
  std::exit(0);
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto text = abg::fuzz::as_text({data, size});
  if (auto c = abg::parse_config(text, "fuzz.toml")) {
    auto again = abg::parse_config(abg::to_toml(c->value), "printed.toml");
    if (!again || abg::to_toml(again->value) != abg::to_toml(c->value)) std::abort();
  }
  // The same bytes as a cluster file (it names files relative to itself).
  static const auto cluster = abg::fuzz::scratch() / "cluster.toml";
  abg::fuzz::write_file(cluster, text);
  (void)abg::read_cluster_file(cluster);
  // And as a token file (private, as read_token_file requires).
  static const auto token = abg::fuzz::scratch() / "token";
  abg::fuzz::write_file(token, text);
  std::filesystem::permissions(token, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  (void)abg::read_token_file(token);
  return 0;
}
