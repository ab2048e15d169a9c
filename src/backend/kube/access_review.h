// Asking the API server who a bearer token belongs to (TokenReview) and whether that user may
// do something (SubjectAccessReview): how a component that serves its own HTTP API lets
// Kubernetes' own authentication and RBAC decide who reads it, as kube-rbac-proxy and the
// control plane's components do. Stateless: the caller caches the answers.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "backend/kube/kube_client.h"

namespace tessera::kube {

// Who a token belongs to, as the API server says (TokenReview status.user).
struct UserInfo {
  std::string username;
  std::string uid;
  std::vector<std::string> groups;
  std::map<std::string, std::vector<std::string>> extra;
};

// What is asked (SubjectAccessReview spec): a resource in a namespace ("" = every namespace),
// or, when `path` is set, a URL of this component's own API (nonResourceAttributes).
struct AccessAttributes {
  std::string verb;  // get, list, ...
  std::string group, resource, ns;
  std::string path;  // non-resource URL, e.g. "/metrics"
};

struct AccessDecision {
  bool allowed = false;
  std::string reason;  // the authorizer's words (RBAC: which binding allowed it), may be ""
};

// Thrown when the API server cannot answer a review (unreachable, or a refusal of the review
// itself, e.g. RBAC without tokenreviews/create): the caller is neither known nor refused.
class ReviewUnavailable : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// TokenReview: the token's user, or nullopt when the API server says it is not valid (expired,
// revoked, unknown, or not for one of `audiences`; empty = the API server's own audience).
std::optional<UserInfo> review_token(Client& client, const std::string& token,
                                     const std::vector<std::string>& audiences = {});

// SubjectAccessReview of `user` doing `what`.
AccessDecision review_access(Client& client, const UserInfo& user, const AccessAttributes& what);

// The request bodies, for tests and logs.
nlohmann::json token_review_body(const std::string& token,
                                 const std::vector<std::string>& audiences);
nlohmann::json access_review_body(const UserInfo& user, const AccessAttributes& what);

}  // namespace tessera::kube
