// Who may read `tessera kube`'s HTTP API (--listen) and what they see. With
// --read-auth kubernetes a caller brings a Kubernetes bearer token (a ServiceAccount's, or
// `kubectl create token`); the API server says whose it is (TokenReview) and what that user may
// do (SubjectAccessReview), as kube-rbac-proxy does:
//   - /metrics, /v1/queues, /v1/nodes, /v1/history: `get` on that non-resource URL;
//   - /v1/jobs: the jobs (pod groups) of the namespaces whose pods the caller may `list`
//     (cluster-wide `list pods`: every namespace); another namespace's job is not found.
// With --read-auth none (the default on a loopback address only) everyone reads everything.
//
// The answers are cached, each entry a small state machine keyed by the token's SHA-256 or by
// (user, question):  absent --review--> fresh --ttl--> expired --next ask--> reviewed again.
// Valid tokens and allowed questions stay fresh longer than refusals, so that a new RoleBinding
// counts within seconds and a removed one within the allowed TTL (the kubelet's defaults).
// A review that gets no answer (API server unreachable) is not cached: the caller gets a 503.
#pragma once

#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "backend/kube/access_review.h"

namespace httplib {
struct Request;
}

namespace tessera {

struct KubeReadAccessOptions {
  double token_ttl = 120;         // a valid token's user
  double invalid_token_ttl = 10;  // a token the API server refused
  double allowed_ttl = 300;       // an allowed question
  double denied_ttl = 30;         // a refused question
  size_t max_entries = 10000;     // per cache; beyond it, expired entries go, then all
};

// The caller of one request.
struct KubeReader {
  bool open = false;  // no authentication configured: sees everything
  kube::UserInfo user;
};

class KubeReadAccess {
 public:
  using TokenReview = std::function<std::optional<kube::UserInfo>(const std::string& token)>;
  using AccessReview =
      std::function<kube::AccessDecision(const kube::UserInfo&, const kube::AccessAttributes&)>;
  using Clock = std::function<double()>;  // seconds, monotonic

  // Everyone reads everything.
  static KubeReadAccess open();
  // Reviews by the API server through `client` (reviews may throw kube::ReviewUnavailable).
  static KubeReadAccess kubernetes(std::shared_ptr<kube::Client> client,
                                   KubeReadAccessOptions opt = {});
  // The same with the reviews and the clock given (tests).
  KubeReadAccess(TokenReview tokens, AccessReview access, KubeReadAccessOptions opt, Clock clock);

  KubeReadAccess(KubeReadAccess&&) noexcept;
  KubeReadAccess& operator=(KubeReadAccess&&) noexcept;
  ~KubeReadAccess();

  bool is_open() const { return !tokens_; }

  // The caller of `req`, by its bearer token. Throws ServiceError: kUnauthorized without a
  // token or with one the API server does not accept, kUnavailable when it cannot be asked.
  KubeReader who(const httplib::Request& req);
  KubeReader who(const std::string& token);
  // Throws ServiceError kForbidden unless the caller may `get` the non-resource URL `path`.
  void require(const KubeReader& r, const std::string& path);
  // Whether the caller may list pods in every namespace.
  bool sees_all_namespaces(const KubeReader& r);
  // The namespaces whose jobs the caller sees: nullopt for every one (an open API, or a caller
  // who may list pods everywhere); else those of `namespaces()`, asked only then, whose pods
  // the caller may list.
  std::optional<std::set<std::string>> visible(
      const KubeReader& r, const std::function<std::vector<std::string>()>& namespaces);

  // Reviews sent to the API server so far (the cache's misses).
  uint64_t reviews() const;

 private:
  struct Entry {
    bool yes = false;
    kube::UserInfo user;  // tokens: whose it is (when yes)
    double expires = 0;
  };
  bool may(const KubeReader& r, const kube::AccessAttributes& a);
  void put(std::map<std::string, Entry>& cache, std::string key, Entry e);

  TokenReview tokens_;
  AccessReview access_;
  KubeReadAccessOptions opt_;
  Clock clock_;
  std::unique_ptr<std::mutex> mu_;  // guards the two caches and the counter
  std::map<std::string, Entry> token_cache_, access_cache_;
  uint64_t reviews_ = 0;
};

}  // namespace tessera
