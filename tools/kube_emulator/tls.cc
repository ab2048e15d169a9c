#include "kube_emulator/tls.h"

#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <memory>
#include <stdexcept>

namespace kube_emulator {

namespace {

struct Deleter {
  void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); }
  void operator()(X509* p) const { X509_free(p); }
  void operator()(BIO* p) const { BIO_free(p); }
};
using Key = std::unique_ptr<EVP_PKEY, Deleter>;
using Cert = std::unique_ptr<X509, Deleter>;

void check(bool ok, const char* what) {
  if (!ok) throw std::runtime_error(std::string("OpenSSL: ") + what + " failed");
}

Key new_key() {
  Key k(EVP_EC_gen("P-256"));
  check(k != nullptr, "EC key generation");
  return k;
}

void add_ext(X509* cert, X509* issuer, int nid, const std::string& value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str());
  check(ext != nullptr, "certificate extension");
  X509_add_ext(cert, ext, -1);
  X509_EXTENSION_free(ext);
}

Cert make_cert(EVP_PKEY* key, const std::string& cn, const std::string& org, X509* issuer,
               EVP_PKEY* issuer_key, long serial) {
  Cert c(X509_new());
  check(c != nullptr, "X509_new");
  X509_set_version(c.get(), 2);
  ASN1_INTEGER_set(X509_get_serialNumber(c.get()), serial);
  X509_gmtime_adj(X509_getm_notBefore(c.get()), -3600);
  X509_gmtime_adj(X509_getm_notAfter(c.get()), 10L * 365 * 24 * 3600);
  X509_set_pubkey(c.get(), key);
  X509_NAME* name = X509_get_subject_name(c.get());
  if (!org.empty()) {
    X509_NAME_add_entry_by_txt(name, "O", MBSTRING_ASC,
                               reinterpret_cast<const unsigned char*>(org.c_str()), -1, -1, 0);
  }
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>(cn.c_str()), -1, -1, 0);
  X509_set_issuer_name(c.get(), issuer != nullptr ? X509_get_subject_name(issuer) : name);
  (void)issuer_key;
  return c;
}

void sign(X509* c, EVP_PKEY* key) {
  check(X509_sign(c, key, EVP_sha256()) > 0, "X509_sign");
}

std::string pem_cert(X509* c) {
  std::unique_ptr<BIO, Deleter> bio(BIO_new(BIO_s_mem()));
  check(PEM_write_bio_X509(bio.get(), c) == 1, "PEM_write_bio_X509");
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<size_t>(n));
}

std::string pem_key(EVP_PKEY* k) {
  std::unique_ptr<BIO, Deleter> bio(BIO_new(BIO_s_mem()));
  check(PEM_write_bio_PrivateKey(bio.get(), k, nullptr, nullptr, 0, nullptr, nullptr) == 1,
        "PEM_write_bio_PrivateKey");
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<size_t>(n));
}

}  // namespace

Pki generate_pki(const std::vector<std::string>& extra_dns,
                 const std::vector<std::string>& extra_ips) {
  Pki pki;
  Key ca_key = new_key();
  Cert ca = make_cert(ca_key.get(), "tessera-emulator-ca", "", nullptr, nullptr, 1);
  add_ext(ca.get(), ca.get(), NID_basic_constraints, "critical,CA:TRUE");
  add_ext(ca.get(), ca.get(), NID_key_usage, "critical,keyCertSign,cRLSign,digitalSignature");
  add_ext(ca.get(), ca.get(), NID_subject_key_identifier, "hash");
  sign(ca.get(), ca_key.get());

  Key server_key = new_key();
  Cert server = make_cert(server_key.get(), "kube-apiserver", "", ca.get(), ca_key.get(), 2);
  std::string san = "DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,IP:127.0.0.1";
  for (const auto& d : extra_dns) san += ",DNS:" + d;
  for (const auto& i : extra_ips) san += ",IP:" + i;
  add_ext(server.get(), ca.get(), NID_basic_constraints, "critical,CA:FALSE");
  add_ext(server.get(), ca.get(), NID_key_usage, "critical,digitalSignature,keyEncipherment");
  add_ext(server.get(), ca.get(), NID_ext_key_usage, "serverAuth");
  add_ext(server.get(), ca.get(), NID_subject_alt_name, san);
  sign(server.get(), ca_key.get());

  Key client_key = new_key();
  Cert client =
      make_cert(client_key.get(), "tessera-admin", "system:masters", ca.get(), ca_key.get(), 3);
  add_ext(client.get(), ca.get(), NID_basic_constraints, "critical,CA:FALSE");
  add_ext(client.get(), ca.get(), NID_key_usage, "critical,digitalSignature,keyEncipherment");
  add_ext(client.get(), ca.get(), NID_ext_key_usage, "clientAuth");
  sign(client.get(), ca_key.get());

  pki.ca = {pem_cert(ca.get()), pem_key(ca_key.get())};
  pki.server = {pem_cert(server.get()), pem_key(server_key.get())};
  pki.client = {pem_cert(client.get()), pem_key(client_key.get())};
  return pki;
}

std::string peer_common_name(const void* ssl_ptr) {
  if (ssl_ptr == nullptr) return "";
  SSL* ssl = const_cast<SSL*>(static_cast<const SSL*>(ssl_ptr));
  if (SSL_get_verify_result(ssl) != X509_V_OK) return "";
  X509* peer = SSL_get1_peer_certificate(ssl);
  if (peer == nullptr) return "";
  char cn[256] = {0};
  X509_NAME_get_text_by_NID(X509_get_subject_name(peer), NID_commonName, cn, sizeof cn);
  X509_free(peer);
  return cn[0] != '\0' ? cn : "(no CN)";
}

}  // namespace kube_emulator
