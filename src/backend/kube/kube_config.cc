#include "backend/kube/kube_config.h"

#include <openssl/evp.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include <yaml-cpp/yaml.h>

namespace tessera::kube {
namespace {

namespace fs = std::filesystem;

// Reads a whole file; false (and `err` set to strerror) when it cannot be read.
bool read_file(const std::string& path, std::string& out, std::string& err) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    err = std::strerror(errno);
    return false;
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) {
    err = "read error";
    return false;
  }
  out = ss.str();
  return true;
}

std::string trim(std::string s) {
  const char* ws = " \t\r\n";
  auto b = s.find_first_not_of(ws);
  if (b == std::string::npos) return "";
  auto e = s.find_last_not_of(ws);
  return s.substr(b, e - b + 1);
}

// Standard base64 (newlines and spaces allowed); false when invalid.
bool base64_decode(const std::string& in, std::string& out) {
  std::string clean;
  clean.reserve(in.size());
  for (char c : in) {
    if (c != '\n' && c != '\r' && c != ' ' && c != '\t') clean.push_back(c);
  }
  if (clean.size() % 4 != 0) return false;
  out.assign(clean.size() / 4 * 3, '\0');
  if (clean.empty()) return true;
  int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                          reinterpret_cast<const unsigned char*>(clean.data()),
                          static_cast<int>(clean.size()));
  if (n < 0) return false;
  // EVP_DecodeBlock counts the padding as zero bytes.
  size_t pad = 0;
  if (clean.back() == '=') ++pad;
  if (clean.size() >= 2 && clean[clean.size() - 2] == '=') ++pad;
  // '=' anywhere but the end is invalid.
  if (clean.find('=') < clean.size() - pad) return false;
  out.resize(static_cast<size_t>(n) - pad);
  return true;
}

class Loader {
 public:
  explicit Loader(std::string path) : path_(std::move(path)) {
    dir_ = fs::path(path_).parent_path();
  }

  [[noreturn]] void fail(const std::string& field, const std::string& msg) const {
    throw KubeConfigError(path_ + ": " + (field.empty() ? "" : field + ": ") + msg);
  }

  std::string resolve(const std::string& p) const {
    if (p.empty() || fs::path(p).is_absolute()) return p;
    return (dir_ / p).string();
  }

  std::string scalar(const YAML::Node& n, const std::string& field) const {
    if (!n || n.IsNull()) return "";
    if (!n.IsScalar()) fail(field, "expected a string");
    return n.as<std::string>();
  }

  bool boolean(const YAML::Node& n, const std::string& field) const {
    if (!n || n.IsNull()) return false;
    try {
      return n.as<bool>();
    } catch (const YAML::Exception&) {
      fail(field, "expected true or false");
    }
  }

  // The map entry of a named list (clusters, users, contexts): its index and the inner map.
  std::pair<size_t, YAML::Node> find_named(const YAML::Node& root, const std::string& list,
                                           const std::string& inner, const std::string& name,
                                           const std::string& what) const {
    YAML::Node items = root[list];
    std::vector<std::string> have;
    if (items && !items.IsNull()) {
      if (!items.IsSequence()) fail(list, "expected a list");
      for (size_t i = 0; i < items.size(); ++i) {
        std::string n = scalar(items[i]["name"], list + "[" + std::to_string(i) + "].name");
        if (n == name) {
          YAML::Node body = items[i][inner];
          if (!body || !body.IsMap()) {
            fail(list + "[" + std::to_string(i) + "]." + inner, "missing or not a map");
          }
          return {i, body};
        }
        have.push_back(n);
      }
    }
    std::string joined;
    for (const auto& h : have) joined += (joined.empty() ? "" : ", ") + h;
    fail(list,
         "no " + what + " \"" + name + "\" (have: " + (joined.empty() ? "none" : joined) + ")");
  }

  // `base`-data (base64) or `base` (a file path): the PEM text, "" when neither is set.
  std::string pem(const YAML::Node& m, const std::string& prefix, const std::string& base) const {
    std::string data = scalar(m[base + "-data"], prefix + base + "-data");
    std::string file = scalar(m[base], prefix + base);
    std::string out;
    std::string field;
    if (!data.empty()) {
      field = prefix + base + "-data";
      if (!base64_decode(data, out)) fail(field, "not valid base64");
    } else if (!file.empty()) {
      field = prefix + base;
      std::string full = resolve(file), err;
      if (!read_file(full, out, err)) fail(field, "cannot read \"" + full + "\": " + err);
    } else {
      return "";
    }
    if (out.find("-----BEGIN") == std::string::npos) fail(field, "not PEM data");
    return out;
  }

  KubeConfig load(const std::string& context_arg) {
    std::string text, err;
    if (!read_file(path_, text, err)) fail("", "cannot read kubeconfig: " + err);
    YAML::Node root;
    try {
      root = YAML::Load(text);
    } catch (const YAML::Exception& e) {
      fail("", std::string("invalid YAML: ") + e.what());
    }
    if (!root.IsMap()) fail("", "not a kubeconfig (expected a map)");

    std::string context = context_arg;
    if (context.empty()) {
      context = scalar(root["current-context"], "current-context");
      if (context.empty()) fail("current-context", "not set and no context was named");
    }
    auto [ci, ctx] = find_named(root, "contexts", "context", context, "context");
    std::string cpre = "contexts[" + std::to_string(ci) + "].context.";
    std::string cluster_name = scalar(ctx["cluster"], cpre + "cluster");
    if (cluster_name.empty()) fail(cpre + "cluster", "missing");
    std::string user_name = scalar(ctx["user"], cpre + "user");

    KubeConfig cfg;
    cfg.source = "kubeconfig " + path_ + " context " + context;
    std::string ns = scalar(ctx["namespace"], cpre + "namespace");
    if (!ns.empty()) cfg.namespace_name = ns;

    auto [li, cl] = find_named(root, "clusters", "cluster", cluster_name, "cluster");
    std::string lpre = "clusters[" + std::to_string(li) + "].cluster.";
    cfg.server = scalar(cl["server"], lpre + "server");
    if (cfg.server.empty()) fail(lpre + "server", "missing");
    if (cfg.server.rfind("https://", 0) != 0 && cfg.server.rfind("http://", 0) != 0) {
      fail(lpre + "server", "\"" + cfg.server + "\" is not an http:// or https:// URL");
    }
    cfg.ca_pem = pem(cl, lpre, "certificate-authority");
    cfg.insecure_skip_tls_verify =
        boolean(cl["insecure-skip-tls-verify"], lpre + "insecure-skip-tls-verify");
    cfg.tls_server_name = scalar(cl["tls-server-name"], lpre + "tls-server-name");
    if (cl["proxy-url"] && !scalar(cl["proxy-url"], lpre + "proxy-url").empty()) {
      fail(lpre + "proxy-url", "proxies are not supported");
    }

    if (!user_name.empty()) {
      auto [ui, us] = find_named(root, "users", "user", user_name, "user");
      std::string upre = "users[" + std::to_string(ui) + "].user.";
      if (us["exec"]) {
        fail(upre + "exec",
             "exec credential plugins are not supported (use token, tokenFile or a client "
             "certificate)");
      }
      if (us["auth-provider"]) {
        fail(upre + "auth-provider",
             "auth-provider plugins are not supported (use token, tokenFile or a client "
             "certificate)");
      }
      if (us["username"] || us["password"]) {
        fail(upre + "username", "basic authentication is not supported");
      }
      std::string token = scalar(us["token"], upre + "token");
      std::string token_file = scalar(us["tokenFile"], upre + "tokenFile");
      if (!token.empty()) {
        cfg.token = TokenSource::fixed(token);
      } else if (!token_file.empty()) {
        cfg.token = TokenSource::file(resolve(token_file));
        try {
          cfg.token->token();
        } catch (const KubeConfigError& e) {
          fail(upre + "tokenFile", e.what());
        }
      }
      cfg.client_cert_pem = pem(us, upre, "client-certificate");
      cfg.client_key_pem = pem(us, upre, "client-key");
      if (cfg.client_cert_pem.empty() != cfg.client_key_pem.empty()) {
        fail(upre + (cfg.client_cert_pem.empty() ? "client-certificate" : "client-key"),
             "missing (a client certificate needs both certificate and key)");
      }
    }
    return cfg;
  }

 private:
  std::string path_;
  fs::path dir_;
};

}  // namespace

std::shared_ptr<TokenSource> TokenSource::fixed(std::string token) {
  auto ts = std::make_shared<TokenSource>();
  ts->token_ = std::move(token);
  return ts;
}

std::shared_ptr<TokenSource> TokenSource::file(std::string path, std::chrono::seconds refresh) {
  auto ts = std::make_shared<TokenSource>();
  ts->path_ = std::move(path);
  ts->refresh_ = refresh;
  return ts;
}

std::string TokenSource::token() {
  std::lock_guard<std::mutex> lock(mu_);
  if (path_.empty()) return token_;
  auto now = std::chrono::steady_clock::now();
  bool never_read = read_at_ == std::chrono::steady_clock::time_point{};
  if (never_read || now - read_at_ >= refresh_) {
    std::string text, err;
    if (read_file(path_, text, err)) {
      token_ = trim(std::move(text));
      read_at_ = now;
    } else if (never_read) {
      throw KubeConfigError("token file \"" + path_ + "\": cannot read: " + err);
    } else {
      read_at_ = now;  // keep the last good token; try again after `refresh`
    }
  }
  return token_;
}

KubeConfig load_kubeconfig(const std::string& path, const std::string& context) {
  return Loader(path).load(context);
}

KubeConfig in_cluster_config(const std::string& sa_dir) {
  const char* host = std::getenv("KUBERNETES_SERVICE_HOST");
  const char* port = std::getenv("KUBERNETES_SERVICE_PORT");
  if (host == nullptr || *host == '\0' || port == nullptr || *port == '\0') {
    throw KubeConfigError(
        "in-cluster config: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT must be set "
        "(not running in a pod?)");
  }
  KubeConfig cfg;
  std::string h = host;
  if (h.find(':') != std::string::npos && h.front() != '[') h = "[" + h + "]";
  cfg.server = "https://" + h + ":" + port;
  fs::path dir(sa_dir);
  std::string token_path = (dir / "token").string();
  cfg.token = TokenSource::file(token_path);
  try {
    cfg.token->token();
  } catch (const KubeConfigError& e) {
    throw KubeConfigError(std::string("in-cluster config: service-account ") + e.what());
  }
  std::string ca_path = (dir / "ca.crt").string(), err;
  if (!read_file(ca_path, cfg.ca_pem, err)) {
    throw KubeConfigError("in-cluster config: cannot read CA \"" + ca_path + "\": " + err);
  }
  if (cfg.ca_pem.find("-----BEGIN") == std::string::npos) {
    throw KubeConfigError("in-cluster config: CA \"" + ca_path + "\" is not PEM data");
  }
  std::string ns;
  if (read_file((dir / "namespace").string(), ns, err) && !trim(ns).empty()) {
    cfg.namespace_name = trim(ns);
  }
  cfg.source = "in-cluster";
  return cfg;
}

}  // namespace tessera::kube
