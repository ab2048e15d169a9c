// Certificates made in-process with OpenSSL: a self-signed CA, a server certificate (SAN
// IP:127.0.0.1, DNS:localhost, plus any asked for) and a client certificate
// (CN=tessera-admin, O=system:masters), all ECDSA P-256 in PEM.
#pragma once

#include <string>
#include <vector>

namespace kube_emulator {

struct PemPair {
  std::string cert;
  std::string key;
};

struct Pki {
  PemPair ca, server, client;
};

// Throws std::runtime_error when OpenSSL fails.
Pki generate_pki(const std::vector<std::string>& extra_dns = {},
                 const std::vector<std::string>& extra_ips = {});

// The subject CN of a verified peer certificate (empty when there is none).
std::string peer_common_name(const void* ssl);

}  // namespace kube_emulator
