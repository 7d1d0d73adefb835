// The cluster file (docs/cluster.md) and PBG's layout.
#include "abg/cluster.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <set>

#include <fmt/format.h>
#include <toml++/toml.h>

namespace abg {

std::string_view to_string(role r) {
  switch (r) {
    case role::coordinator: return "coordinator";
    case role::lock_server: return "lock_server";
    case role::trainer: return "trainer";
    case role::partition_server: return "partition_server";
    case role::parameter_server: return "parameter_server";
  }
  return "?";
}

tls_files tls_files::of_node(std::string_view name) const {
  auto expand = [&](std::string p) {
    for (auto at = p.find("{name}"); at != std::string::npos; at = p.find("{name}", at + name.size()))
      p.replace(at, 6, name);
    return p;
  };
  return {expand(certificate), expand(key), expand(ca)};
}

std::optional<role> parse_role(std::string_view name) {
  for (auto r : {role::coordinator, role::lock_server, role::trainer, role::partition_server, role::parameter_server})
    if (to_string(r) == name) return r;
  return std::nullopt;
}

bool node_spec::has(role r) const { return std::find(roles.begin(), roles.end(), r) != roles.end(); }

std::optional<std::size_t> cluster_spec::find(std::string_view name) const {
  for (std::size_t i = 0; i < nodes.size(); ++i)
    if (nodes[i].name == name) return i;
  return std::nullopt;
}

std::size_t cluster_spec::coordinator() const {
  for (std::size_t i = 0; i < nodes.size(); ++i)
    if (nodes[i].has(role::coordinator)) return i;
  return 0;
}

std::size_t cluster_spec::count(role r) const { return with(r).size(); }

std::vector<std::size_t> cluster_spec::with(role r) const {
  std::vector<std::size_t> out;
  for (std::size_t i = 0; i < nodes.size(); ++i)
    if (nodes[i].has(r)) out.push_back(i);
  return out;
}

namespace {

std::string where(const std::filesystem::path& file, const toml::node& n) {
  return fmt::format("{}:{}:{}", file.string(), n.source().begin.line, n.source().begin.column);
}

} // namespace

expected<cluster_spec> read_cluster_file(const std::filesystem::path& file) {
  toml::table root;
  try {
    root = toml::parse_file(file.string());
  } catch (const toml::parse_error& e) {
    return fail("{}:{}:{}: {}", file.string(), e.source().begin.line, e.source().begin.column, e.description());
  }
  cluster_spec spec;
  spec.source = file.string();
  std::vector<std::string> problems;
  auto problem = [&](const toml::node& n, std::string text) { problems.push_back(where(file, n) + ": " + text); };
  for (auto&& [k, v] : root)
    if (k != "cluster" && k != "nodes" && k != "tls")
      problem(v, fmt::format("unknown key '{}' (a cluster file has [cluster], [tls] and [[nodes]])", k.str()));
  auto path_of = [&](const std::string& f) {
    return (std::filesystem::path(f).is_absolute() ? std::filesystem::path(f) : file.parent_path() / f)
      .lexically_normal()
      .string();
  };
  if (auto* t = root["tls"].as_table()) {
    for (auto&& [k, v] : *t)
      if (k != "certificate" && k != "key" && k != "ca")
        problem(v, fmt::format("unknown key 'tls.{}' (keys: certificate, key, ca)", k.str()));
    for (auto [key, out] : {std::pair{"certificate", &spec.tls.certificate}, std::pair{"key", &spec.tls.key},
                            std::pair{"ca", &spec.tls.ca}}) {
      auto f = t->get_as<std::string>(key);
      if (!f || f->get().empty())
        problem(*t, fmt::format("[tls] needs {} (a PEM file; `abg cluster certs` makes a CA and each node's "
                                "certificate and key for trying it out)",
                                key));
      else
        *out = path_of(f->get());
    }
  } else if (root.contains("tls")) {
    problem(*root.get("tls"), "[tls] must be a table");
  }
  if (auto* c = root["cluster"].as_table()) {
    auto seconds = [&](std::string_view key, std::chrono::milliseconds& out) {
      auto* n = c->get(key);
      if (!n) return;
      auto v = n->value<double>();
      if (!v || !std::isfinite(*v) || *v <= 0 || *v > 86400)
        return problem(*n, fmt::format("cluster.{} must be a number of seconds in (0, 86400]", key));
      out = std::chrono::milliseconds(static_cast<std::int64_t>(std::llround(*v * 1000)));
    };
    for (auto&& [k, v] : *c)
      if (k != "heartbeat_interval" && k != "heartbeat_timeout" && k != "join_timeout" && k != "request_timeout" &&
          k != "server_wait" && k != "token_file" && k != "admin_token_file" && k != "handshake_timeout" &&
          k != "max_pending_connections" && k != "inspect")
        problem(v, fmt::format("unknown key 'cluster.{}'", k.str()));
    seconds("heartbeat_interval", spec.heartbeat_interval);
    seconds("heartbeat_timeout", spec.heartbeat_timeout);
    seconds("join_timeout", spec.join_timeout);
    seconds("request_timeout", spec.request_timeout);
    seconds("server_wait", spec.server_wait);
    seconds("handshake_timeout", spec.handshake_timeout);
    if (auto* n = c->get("token_file")) {
      if (auto f = n->value<std::string>(); f && !f->empty())
        spec.token_file = path_of(*f);
      else
        problem(*n, "cluster.token_file must be the path of a token file (make one with `abg cluster token FILE`)");
    }
    if (auto* n = c->get("inspect")) {
      auto f = n->value<std::string>();
      if (f && parse_host_port(*f) && parse_host_port(*f)->second != 0)
        spec.inspect = *f;
      else
        problem(*n, "cluster.inspect must be where the coordinator's inspector listens, \"HOST:PORT\" with a port");
    }
    if (auto* n = c->get("admin_token_file")) {
      if (auto f = n->value<std::string>(); f && !f->empty())
        spec.admin_token_file = path_of(*f);
      else
        problem(*n, "cluster.admin_token_file must be the path of a token file (make one with `abg cluster token "
                    "FILE`), another than token_file");
    }
    if (auto* n = c->get("max_pending_connections")) {
      auto v = n->value<std::int64_t>();
      if (!v || *v < 1 || *v > 65536)
        problem(*n, "cluster.max_pending_connections must be an integer in [1, 65536]");
      else
        spec.max_pending_connections = static_cast<std::size_t>(*v);
    }
    if (spec.heartbeat_timeout < 2 * spec.heartbeat_interval)
      problem(*c, "cluster.heartbeat_timeout must be at least twice cluster.heartbeat_interval");
  } else if (root.contains("cluster")) {
    problem(*root.get("cluster"), "[cluster] must be a table");
  }
  auto* nodes = root["nodes"].as_array();
  if (!nodes || nodes->empty())
    return fail("{}: no [[nodes]]: a cluster file lists its nodes as [[nodes]] tables with name, host, port and roles",
                file.string());
  std::set<std::string> names;
  std::set<std::pair<std::string, std::uint16_t>> addresses;
  for (auto& n : *nodes) {
    auto* t = n.as_table();
    if (!t) {
      problem(n, "each [[nodes]] entry must be a table");
      continue;
    }
    node_spec ns;
    for (auto&& [k, v] : *t)
      if (k != "name" && k != "host" && k != "port" && k != "roles")
        problem(v, fmt::format("unknown key '{}' in a node (keys: name, host, port, roles)", k.str()));
    if (auto name = t->get_as<std::string>("name"); name && !name->get().empty())
      ns.name = name->get();
    else
      problem(n, "a node needs a name (a non-empty string)");
    if (!ns.name.empty() && !names.insert(ns.name).second) problem(n, fmt::format("node name '{}' appears twice", ns.name));
    if (auto host = t->get_as<std::string>("host"); host && !host->get().empty())
      ns.host = host->get();
    else
      problem(n, fmt::format("node '{}' needs a host (a name or address others reach it at)", ns.name));
    if (auto* port = t->get("port"); port && port->value<std::int64_t>() && *port->value<std::int64_t>() > 0 &&
                                     *port->value<std::int64_t>() < 65536)
      ns.port = static_cast<std::uint16_t>(*port->value<std::int64_t>());
    else
      problem(port ? *port : n, fmt::format("node '{}' needs a port in [1, 65535]", ns.name));
    if (!ns.host.empty() && ns.port && !addresses.insert({ns.host, ns.port}).second)
      problem(n, fmt::format("node '{}': {}:{} is another node's address too", ns.name, ns.host, ns.port));
    if (auto* roles = t->get_as<toml::array>("roles")) {
      for (auto& r : *roles) {
        auto name = r.value<std::string>();
        auto parsed = name ? parse_role(*name) : std::nullopt;
        if (!parsed)
          problem(r, "unknown role (roles: coordinator, lock_server, trainer, partition_server, parameter_server)");
        else if (ns.has(*parsed))
          problem(r, fmt::format("role {} listed twice", *name));
        else
          ns.roles.push_back(*parsed);
      }
    } else {
      problem(n, fmt::format("node '{}' needs roles, e.g. roles = [\"trainer\", \"partition_server\"]", ns.name));
    }
    spec.nodes.push_back(std::move(ns));
  }
  if (problems.empty()) {
    auto exactly_one = [&](role r) {
      auto n = spec.count(r);
      if (n != 1)
        problems.push_back(fmt::format("{}: the cluster needs exactly one node with role {}, it has {}", file.string(),
                                       to_string(r), n));
    };
    exactly_one(role::coordinator);
    exactly_one(role::lock_server);
    for (auto r : {role::trainer, role::partition_server})
      if (spec.count(r) == 0)
        problems.push_back(fmt::format("{}: the cluster needs at least one node with role {}", file.string(), to_string(r)));
    if (spec.count(role::trainer) > 1 && spec.count(role::parameter_server) == 0)
      problems.push_back(fmt::format("{}: {} trainers share their parameters through parameter servers: give at least "
                                     "one node the role parameter_server",
                                     file.string(), spec.count(role::trainer)));
  }
  if (!problems.empty()) {
    std::string all;
    for (auto& p : problems) all += (all.empty() ? "" : "\n") + p;
    return fail("{}", all);
  }
  return spec;
}

std::optional<std::pair<std::string, std::uint16_t>> parse_host_port(const std::string& text) {
  auto colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0) return std::nullopt;
  unsigned port = 0;
  auto digits = std::string_view(text).substr(colon + 1);
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), port);
  if (digits.empty() || ec != std::errc{} || end != digits.data() + digits.size() || port > 65535)
    return std::nullopt;
  auto host = text.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  return std::pair{host, static_cast<std::uint16_t>(port)};
}

expected<std::pair<std::string, std::uint16_t>> parse_metrics_address(const std::string& text) {
  auto at = parse_host_port(text);
  if (!at || at->second == 0)
    return fail("--metrics {}: give ADDRESS:PORT with a port Prometheus can be told (127.0.0.1:9464)", text);
  return std::move(*at);
}

expected<init_method> parse_init_method(std::string_view text) {
  init_method m;
  if (text.starts_with("file://")) {
    m.file = true;
    m.path = std::string(text.substr(7));
    if (m.path.empty() || m.path.front() != '/')
      return fail("distributed_init_method = \"{}\": a file:// method names an absolute path (file:///shared/abg-rendezvous)",
                  text);
    return m;
  }
  if (text.starts_with("tcp://")) {
    auto rest = text.substr(6);
    auto colon = rest.rfind(':');
    int port = 0;
    if (colon == std::string_view::npos || colon == 0 ||
        std::from_chars(rest.data() + colon + 1, rest.data() + rest.size(), port).ec != std::errc{} || port < 1 ||
        port > 65535)
      return fail("distributed_init_method = \"{}\": a tcp:// method is tcp://HOST:PORT with a port in [1, 65535]", text);
    m.host = std::string(rest.substr(0, colon));
    if (m.host.size() > 2 && m.host.front() == '[' && m.host.back() == ']') m.host = m.host.substr(1, m.host.size() - 2);
    m.port = static_cast<std::uint16_t>(port);
    return m;
  }
  return fail("distributed_init_method = \"{}\" is neither tcp://HOST:PORT nor file:///PATH", text);
}

cluster_spec pbg_layout(std::int64_t machines, std::int64_t num_partition_servers) {
  cluster_spec spec;
  machines = std::max<std::int64_t>(1, machines);
  for (std::int64_t r = 0; r < machines; ++r) {
    node_spec n;
    n.name = fmt::format("rank{}", r);
    if (r == 0) n.roles = {role::coordinator, role::lock_server};
    n.roles.push_back(role::trainer);
    n.roles.push_back(role::parameter_server);
    if (num_partition_servers < 0 || (num_partition_servers == 0 && r == 0)) n.roles.push_back(role::partition_server);
    spec.nodes.push_back(std::move(n));
  }
  for (std::int64_t k = 0; k < num_partition_servers; ++k)
    spec.nodes.push_back({fmt::format("rank{}", machines + k), "", 0, {role::partition_server}});
  return spec;
}

} // namespace abg
