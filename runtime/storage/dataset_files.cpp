#include "abg/storage/dataset_files.h"

#include <cerrno>
#include <cstring>
#include <vector>

#include <fcntl.h>
#include <unistd.h>
#include <xxhash.h>

#include <fmt/format.h>

#include "abg/storage/edge_manifest.h"
#include "abg/storage/entity_store.h"

namespace abg::storage {

namespace fs = std::filesystem;

fs::path dataset_root(const config& cfg, std::uint32_t root) {
  return root == 0 ? fs::path(cfg.entity_path) : fs::path(cfg.edge_paths.at(root - 1));
}

std::string dataset_root_label(std::uint32_t root) {
  return root == 0 ? std::string("entity_path") : fmt::format("edge_paths[{}]", root - 1);
}

bool valid_dataset_file_name(const std::string& name) {
  return !name.empty() && name.size() <= 255 && name != "." && name != ".." &&
         name.find_first_of(std::string_view("/\0", 2)) == std::string::npos;
}

expected<std::uint64_t> file_checksum(const fs::path& file) {
  int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return fail("cannot read {}: {}", file.string(), std::strerror(errno));
  XXH3_state_t* state = XXH3_createState();
  XXH3_64bits_reset(state);
  std::vector<char> buffer(std::size_t{4} << 20);
  expected<std::uint64_t> out;
  for (;;) {
    auto n = ::read(fd, buffer.data(), buffer.size());
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0) {
      out = fail("cannot read {}: {}", file.string(), std::strerror(errno));
      break;
    }
    if (n == 0) {
      out = XXH3_64bits_digest(state);
      break;
    }
    XXH3_64bits_update(state, buffer.data(), static_cast<std::size_t>(n));
  }
  XXH3_freeState(state);
  ::close(fd);
  return out;
}

expected<std::vector<dataset_file>> list_dataset_files(const config& cfg) {
  std::vector<std::pair<std::uint32_t, std::string>> names;
  for (std::uint32_t root = 1; root <= cfg.edge_paths.size(); ++root) {
    auto manifest = read_edge_manifest(dataset_root(cfg, root));
    if (!manifest)
      return std::unexpected(manifest.error());
    for (auto& b : manifest->buckets)
      names.emplace_back(root, b.file);
    names.emplace_back(root, edge_manifest_file(dataset_root(cfg, root)).filename().string());
  }
  auto meta = read_entity_meta(dataset_root(cfg, 0));
  if (!meta)
    return std::unexpected(meta.error());
  for (auto& t : meta->types)
    for (std::int64_t part = 0; part < t.num_partitions(); ++part)
      names.emplace_back(0, entity_names_file(dataset_root(cfg, 0), t.name, part).filename().string());
  names.emplace_back(0, entity_meta_file(dataset_root(cfg, 0)).filename().string());
  std::vector<dataset_file> out;
  for (auto& [root, name] : names) {
    if (!valid_dataset_file_name(name))
      return fail("{} lists a file named '{}', which is not a plain file name", dataset_root_label(root), name);
    auto path = dataset_root(cfg, root) / name;
    std::error_code ec;
    auto bytes = fs::file_size(path, ec);
    if (ec)
      return fail("{} ({}): {} is listed but cannot be read: {}", dataset_root_label(root),
                  dataset_root(cfg, root).string(), name, ec.message());
    auto sum = file_checksum(path);
    if (!sum)
      return std::unexpected(sum.error());
    out.push_back({root, name, bytes, *sum});
  }
  return out;
}

std::string dataset_file_difference(const config& cfg, const dataset_file& f) {
  auto path = dataset_root(cfg, f.root) / f.name;
  std::error_code ec;
  auto bytes = fs::file_size(path, ec);
  if (ec)
    return "missing";
  if (bytes != f.bytes)
    return fmt::format("{} bytes, the coordinator's {}", bytes, f.bytes);
  auto sum = file_checksum(path);
  if (!sum)
    return sum.error().message;
  return *sum == f.checksum ? std::string() : std::string("its checksum differs from the coordinator's");
}

} // namespace abg::storage
