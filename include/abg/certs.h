// Certificates for trying TLS between nodes out (`abg cluster certs`,
// docs/security.md): a new CA and one certificate per node of a cluster
// file, made with the OpenSSL library. For production, use your own PKI.
#pragma once

#include <filesystem>
#include <vector>

#include "abg/cluster.h"
#include "abg/error.h"

namespace abg {

/// Writes into `outdir` (created): ca.pem and ca.key, and for each node of
/// `spec` NAME.pem (its certificate, signed by the CA, naming its host) and
/// NAME.key, and console.pem and console.key for `abg console --cluster`; keys mode 0600, P-256, valid for `days` from now (0: already
/// expired, to try a refusal). Refuses to replace any existing file.
/// Returns the files written.
expected<std::vector<std::filesystem::path>> write_cluster_certificates(const cluster_spec& spec,
                                                                        const std::filesystem::path& outdir,
                                                                        int days = 365);

} // namespace abg
