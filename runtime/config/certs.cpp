#include "abg/certs.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include <arpa/inet.h>
#include <fcntl.h>
#include <unistd.h>

#include <fmt/format.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

namespace abg {

namespace {

struct pkey_free {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
struct x509_free {
  void operator()(X509* x) const { X509_free(x); }
};
using key_ptr = std::unique_ptr<EVP_PKEY, pkey_free>;
using cert_ptr = std::unique_ptr<X509, x509_free>;

std::string openssl_error() {
  char text[256] = "unknown error";
  if (auto e = ERR_get_error()) ERR_error_string_n(e, text, sizeof text);
  ERR_clear_error();
  return text;
}

bool add_ext(X509* cert, X509* issuer, int nid, const char* value) {
  X509V3_CTX ctx;
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value);
  if (!ext) return false;
  bool ok = X509_add_ext(cert, ext, -1) == 1;
  X509_EXTENSION_free(ext);
  return ok;
}

// A certificate for `key` named `cn`, signed by `issuer_key` (and `issuer`,
// or itself when null).
expected<cert_ptr> make_cert(EVP_PKEY* key, const std::string& cn, X509* issuer, EVP_PKEY* issuer_key, int days,
                             const std::string& san) {
  cert_ptr c(X509_new());
  BIGNUM* serial = BN_new();
  bool ok = c && serial && X509_set_version(c.get(), 2) == 1 && BN_rand(serial, 120, BN_RAND_TOP_ANY, BN_RAND_BOTTOM_ANY) == 1 &&
            BN_to_ASN1_INTEGER(serial, X509_get_serialNumber(c.get())) != nullptr &&
            X509_gmtime_adj(X509_getm_notBefore(c.get()), days > 0 ? -60 : -2 * 86400) != nullptr &&
            X509_gmtime_adj(X509_getm_notAfter(c.get()), days > 0 ? long{days} * 86400 : -86400) != nullptr &&
            X509_set_pubkey(c.get(), key) == 1;
  BN_free(serial);
  X509_NAME* name = c ? X509_get_subject_name(c.get()) : nullptr;
  ok = ok && X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, reinterpret_cast<const unsigned char*>(cn.c_str()),
                                        -1, -1, 0) == 1 &&
       X509_set_issuer_name(c.get(), issuer ? X509_get_subject_name(issuer) : name) == 1;
  X509* signer = issuer ? issuer : c.get();
  if (ok && !issuer)
    ok = add_ext(c.get(), signer, NID_basic_constraints, "critical,CA:TRUE") &&
         add_ext(c.get(), signer, NID_key_usage, "critical,keyCertSign,cRLSign") &&
         add_ext(c.get(), signer, NID_subject_key_identifier, "hash");
  if (ok && issuer)
    ok = add_ext(c.get(), signer, NID_basic_constraints, "critical,CA:FALSE") &&
         add_ext(c.get(), signer, NID_key_usage, "critical,digitalSignature,keyEncipherment") &&
         add_ext(c.get(), signer, NID_ext_key_usage, "serverAuth,clientAuth") &&
         add_ext(c.get(), signer, NID_subject_key_identifier, "hash") &&
         add_ext(c.get(), signer, NID_authority_key_identifier, "keyid:always") &&
         (san.empty() || add_ext(c.get(), signer, NID_subject_alt_name, san.c_str()));
  ok = ok && X509_sign(c.get(), issuer_key, EVP_sha256()) > 0;
  if (!ok) return fail("cannot make the certificate for {}: {}", cn, openssl_error());
  return c;
}

// Opens a new file (never an existing one) with `mode`.
expected<FILE*> create(const std::filesystem::path& p, int mode) {
  int fd = ::open(p.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
  if (fd < 0)
    return fail("{}: cannot create it: {}{}", p.string(), std::strerror(errno),
                errno == EEXIST ? " (certificates and keys are never replaced: choose an empty folder)" : "");
  return ::fdopen(fd, "w");
}

expected<void> write_pair(const std::filesystem::path& dir, const std::string& stem, EVP_PKEY* key, X509* cert,
                          std::vector<std::filesystem::path>& written) {
  auto key_file = dir / (stem + ".key"), cert_file = dir / (stem + ".pem");
  auto k = create(key_file, 0600);
  if (!k) return std::unexpected(k.error());
  bool ok = PEM_write_PrivateKey(*k, key, nullptr, nullptr, 0, nullptr, nullptr) == 1;
  std::fclose(*k);
  if (!ok) return fail("{}: cannot write the key: {}", key_file.string(), openssl_error());
  written.push_back(key_file);
  auto c = create(cert_file, 0644);
  if (!c) return std::unexpected(c.error());
  ok = PEM_write_X509(*c, cert) == 1;
  std::fclose(*c);
  if (!ok) return fail("{}: cannot write the certificate: {}", cert_file.string(), openssl_error());
  written.push_back(cert_file);
  return {};
}

std::string san_of(const std::string& host) {
  if (host.empty()) return {};
  in_addr a4{};
  in6_addr a6{};
  if (::inet_pton(AF_INET, host.c_str(), &a4) == 1 || ::inet_pton(AF_INET6, host.c_str(), &a6) == 1)
    return "IP:" + host;
  return "DNS:" + host;
}

} // namespace

expected<std::vector<std::filesystem::path>> write_cluster_certificates(const cluster_spec& spec,
                                                                        const std::filesystem::path& outdir, int days) {
  // ca.* and console.* are the CA's and the console's files: a node of that
  // name would need the same ones.
  for (const auto& n : spec.nodes)
    if (n.name == "ca" || n.name == "console")
      return fail("node '{}': `abg cluster certs` writes the CA as ca.pem and the console's certificate as "
                  "console.pem, so it cannot name a node's files {}.pem: rename the node",
                  n.name, n.name);
  std::error_code ec;
  std::filesystem::create_directories(outdir, ec);
  if (ec) return fail("{}: cannot create it: {}", outdir.string(), ec.message());
  std::vector<std::filesystem::path> written;
  key_ptr ca_key(EVP_EC_gen("P-256"));
  if (!ca_key) return fail("cannot make a key: {}", openssl_error());
  auto ca = make_cert(ca_key.get(), "abg cluster CA", nullptr, ca_key.get(), std::max(days, 3650), "");
  if (!ca) return std::unexpected(ca.error());
  if (auto ok = write_pair(outdir, "ca", ca_key.get(), ca->get(), written); !ok) return std::unexpected(ok.error());
  for (const auto& n : spec.nodes) {
    key_ptr key(EVP_EC_gen("P-256"));
    if (!key) return fail("cannot make a key: {}", openssl_error());
    auto cert = make_cert(key.get(), "abg node " + n.name, ca->get(), ca_key.get(), days, san_of(n.host));
    if (!cert) return std::unexpected(cert.error());
    if (auto ok = write_pair(outdir, n.name, key.get(), cert->get(), written); !ok) return std::unexpected(ok.error());
  }
  // `abg console --cluster`'s own ({name} = console in [tls]): it connects
  // to the coordinator's inspector like a node, so the CA must have signed it.
  key_ptr key(EVP_EC_gen("P-256"));
  if (!key) return fail("cannot make a key: {}", openssl_error());
  auto cert = make_cert(key.get(), "abg console", ca->get(), ca_key.get(), days, "");
  if (!cert) return std::unexpected(cert.error());
  if (auto ok = write_pair(outdir, "console", key.get(), cert->get(), written); !ok) return std::unexpected(ok.error());
  return written;
}

} // namespace abg
