#include "api/kube_read_access.h"

#include <chrono>

#include <httplib.h>

#include "api/http_util.h"
#include "control/read_model.h"
#include "control/token.h"

namespace tessera {
namespace {

double steady_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// One string per distinct (user, question): a SubjectAccessReview's answer depends on both.
std::string access_key(const kube::UserInfo& u, const kube::AccessAttributes& a) {
  std::string k = u.username + '\x1f' + u.uid + '\x1f';
  for (const std::string& g : u.groups) k += g + '\x1e';
  k += '\x1f';
  for (const auto& [name, values] : u.extra) {
    k += name + '=';
    for (const std::string& v : values) k += v + '\x1e';
  }
  return k + '\x1f' + a.verb + '\x1f' + a.group + '\x1f' + a.resource + '\x1f' + a.ns + '\x1f' +
         a.path;
}

kube::AccessAttributes list_pods(const std::string& ns) {
  kube::AccessAttributes a;
  a.verb = "list";
  a.resource = "pods";
  a.ns = ns;
  return a;
}

template <typename F>
auto reviewed(F&& f) {
  try {
    return f();
  } catch (const kube::ReviewUnavailable& e) {
    throw ServiceError(ServiceError::kUnavailable, "",
                       std::string("cannot check the caller with the API server: ") + e.what());
  }
}

}  // namespace

KubeReadAccess KubeReadAccess::open() {
  return KubeReadAccess(nullptr, nullptr, {}, steady_seconds);
}

KubeReadAccess KubeReadAccess::kubernetes(std::shared_ptr<kube::Client> client,
                                          KubeReadAccessOptions opt) {
  return KubeReadAccess(
      [client](const std::string& token) { return kube::review_token(*client, token); },
      [client](const kube::UserInfo& u, const kube::AccessAttributes& a) {
        return kube::review_access(*client, u, a);
      },
      opt, steady_seconds);
}

KubeReadAccess::KubeReadAccess(TokenReview tokens, AccessReview access, KubeReadAccessOptions opt,
                               Clock clock)
    : tokens_(std::move(tokens)),
      access_(std::move(access)),
      opt_(opt),
      clock_(std::move(clock)),
      mu_(std::make_unique<std::mutex>()) {}

KubeReadAccess::KubeReadAccess(KubeReadAccess&&) noexcept = default;
KubeReadAccess& KubeReadAccess::operator=(KubeReadAccess&&) noexcept = default;
KubeReadAccess::~KubeReadAccess() = default;

uint64_t KubeReadAccess::reviews() const {
  std::lock_guard lock(*mu_);
  return reviews_;
}

void KubeReadAccess::put(std::map<std::string, Entry>& cache, std::string key, Entry e) {
  if (cache.size() >= opt_.max_entries) {
    const double now = clock_();
    std::erase_if(cache, [now](const auto& kv) { return kv.second.expires <= now; });
    if (cache.size() >= opt_.max_entries) cache.clear();
  }
  cache[std::move(key)] = std::move(e);
}

KubeReader KubeReadAccess::who(const httplib::Request& req) {
  if (is_open()) return KubeReader{true, {}};
  return who(bearer(req));
}

KubeReader KubeReadAccess::who(const std::string& token) {
  if (is_open()) return KubeReader{true, {}};
  if (token.empty()) {
    throw ServiceError(ServiceError::kUnauthorized, "",
                       "a Kubernetes bearer token is required (Authorization: Bearer TOKEN; "
                       "e.g. kubectl create token SERVICEACCOUNT)");
  }
  // Keyed by the token's hash: the cache never holds a usable token.
  const std::string key = sha256_hex(token);
  {
    std::lock_guard lock(*mu_);
    auto it = token_cache_.find(key);
    if (it != token_cache_.end() && it->second.expires > clock_()) {
      if (!it->second.yes) {
        throw ServiceError(ServiceError::kUnauthorized, "",
                           "the API server does not accept this token");
      }
      return KubeReader{false, it->second.user};
    }
  }
  const std::optional<kube::UserInfo> user = reviewed([&] { return tokens_(token); });
  Entry e;
  e.yes = user.has_value();
  if (user) e.user = *user;
  e.expires = clock_() + (e.yes ? opt_.token_ttl : opt_.invalid_token_ttl);
  {
    std::lock_guard lock(*mu_);
    ++reviews_;
    put(token_cache_, key, e);
  }
  if (!user) {
    throw ServiceError(ServiceError::kUnauthorized, "",
                       "the API server does not accept this token (expired, revoked or unknown)");
  }
  return KubeReader{false, *user};
}

bool KubeReadAccess::may(const KubeReader& r, const kube::AccessAttributes& a) {
  if (r.open) return true;
  const std::string key = access_key(r.user, a);
  {
    std::lock_guard lock(*mu_);
    auto it = access_cache_.find(key);
    if (it != access_cache_.end() && it->second.expires > clock_()) return it->second.yes;
  }
  const kube::AccessDecision d = reviewed([&] { return access_(r.user, a); });
  Entry e;
  e.yes = d.allowed;
  e.expires = clock_() + (d.allowed ? opt_.allowed_ttl : opt_.denied_ttl);
  std::lock_guard lock(*mu_);
  ++reviews_;
  put(access_cache_, key, e);
  return d.allowed;
}

void KubeReadAccess::require(const KubeReader& r, const std::string& path) {
  kube::AccessAttributes a;
  a.verb = "get";
  a.path = path;
  if (may(r, a)) return;
  throw ServiceError(ServiceError::kForbidden, "",
                     "user \"" + r.user.username + "\" may not get " + path +
                         " (RBAC: nonResourceURLs [\"" + path +
                         "\"] verbs [\"get\"], as ClusterRole tessera-viewer grants)");
}

bool KubeReadAccess::sees_all_namespaces(const KubeReader& r) {
  return may(r, list_pods(""));
}

std::optional<std::set<std::string>> KubeReadAccess::visible(
    const KubeReader& r, const std::function<std::vector<std::string>()>& namespaces) {
  if (r.open || sees_all_namespaces(r)) return std::nullopt;
  std::set<std::string> out;
  for (const std::string& ns : namespaces()) {
    if (!ns.empty() && !out.contains(ns) && may(r, list_pods(ns))) out.insert(ns);
  }
  return out;
}

}  // namespace tessera
