#include "backend/kube/access_review.h"

namespace tessera::kube {
namespace {

constexpr const char* kTokenReviews = "/apis/authentication.k8s.io/v1/tokenreviews";
constexpr const char* kAccessReviews = "/apis/authorization.k8s.io/v1/subjectaccessreviews";

// The review's answer, or ReviewUnavailable saying why there is none.
nlohmann::json answer(const Response& r, const char* what) {
  if (!r.ok()) throw ReviewUnavailable(std::string(what) + ": " + r.describe());
  nlohmann::json j = r.json();
  if (!j.is_object() || !j.contains("status") || !j["status"].is_object()) {
    throw ReviewUnavailable(std::string(what) + ": the API server's answer has no status");
  }
  return j["status"];
}

}  // namespace

nlohmann::json token_review_body(const std::string& token,
                                 const std::vector<std::string>& audiences) {
  nlohmann::json spec{{"token", token}};
  if (!audiences.empty()) spec["audiences"] = audiences;
  return {{"apiVersion", "authentication.k8s.io/v1"}, {"kind", "TokenReview"}, {"spec", spec}};
}

nlohmann::json access_review_body(const UserInfo& user, const AccessAttributes& what) {
  nlohmann::json spec{{"user", user.username}, {"groups", user.groups}};
  if (!user.uid.empty()) spec["uid"] = user.uid;
  if (!user.extra.empty()) spec["extra"] = user.extra;
  if (!what.path.empty()) {
    spec["nonResourceAttributes"] = {{"path", what.path}, {"verb", what.verb}};
  } else {
    spec["resourceAttributes"] = {{"verb", what.verb},
                                  {"group", what.group},
                                  {"resource", what.resource},
                                  {"namespace", what.ns}};
  }
  return {
      {"apiVersion", "authorization.k8s.io/v1"}, {"kind", "SubjectAccessReview"}, {"spec", spec}};
}

std::optional<UserInfo> review_token(Client& client, const std::string& token,
                                     const std::vector<std::string>& audiences) {
  const nlohmann::json s =
      answer(client.post(kTokenReviews, token_review_body(token, audiences)), "TokenReview");
  if (!s.value("authenticated", false)) return std::nullopt;
  const nlohmann::json u = s.value("user", nlohmann::json::object());
  UserInfo out;
  out.username = u.value("username", "");
  out.uid = u.value("uid", "");
  if (u.contains("groups") && u["groups"].is_array()) {
    for (const auto& g : u["groups"]) {
      if (g.is_string()) out.groups.push_back(g.get<std::string>());
    }
  }
  if (u.contains("extra") && u["extra"].is_object()) {
    for (const auto& [k, v] : u["extra"].items()) {
      if (!v.is_array()) continue;
      for (const auto& x : v) {
        if (x.is_string()) out.extra[k].push_back(x.get<std::string>());
      }
    }
  }
  // An authenticated answer without a name cannot be authorized: treat it as no user.
  if (out.username.empty()) return std::nullopt;
  return out;
}

AccessDecision review_access(Client& client, const UserInfo& user, const AccessAttributes& what) {
  const nlohmann::json s =
      answer(client.post(kAccessReviews, access_review_body(user, what)), "SubjectAccessReview");
  AccessDecision d;
  d.allowed = s.value("allowed", false) && !s.value("denied", false);
  d.reason = s.value("reason", "");
  if (d.reason.empty()) d.reason = s.value("evaluationError", "");
  return d;
}

}  // namespace tessera::kube
