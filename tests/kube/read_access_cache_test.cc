// KubeReadAccess's caches as a state machine, with the reviews and the clock given: what is
// asked of the API server, when, and what a caller gets meanwhile.
#include <gtest/gtest.h>

#include "api/kube_read_access.h"
#include "control/read_model.h"

namespace tessera {
namespace {

class ReadAccessCache : public ::testing::Test {
 protected:
  KubeReadAccess make(KubeReadAccessOptions opt = {}) {
    return KubeReadAccess(
        [this](const std::string& token) -> std::optional<kube::UserInfo> {
          ++token_calls;
          if (down) throw kube::ReviewUnavailable("no answer: connection refused");
          auto it = users.find(token);
          if (it == users.end()) return std::nullopt;
          kube::UserInfo u;
          u.username = it->second;
          u.groups = {"system:authenticated"};
          return u;
        },
        [this](const kube::UserInfo& u, const kube::AccessAttributes& a) {
          ++access_calls;
          if (down) throw kube::ReviewUnavailable("no answer: connection refused");
          kube::AccessDecision d;
          d.allowed = grants.contains(u.username + " " + a.verb + " " +
                                      (a.path.empty() ? a.resource + "@" + a.ns : a.path));
          return d;
        },
        opt, [this] { return now; });
  }
  // What the caller sees of `namespaces` (nullopt: every namespace).
  static std::optional<std::set<std::string>> seen(KubeReadAccess& a, const KubeReader& r,
                                                   std::vector<std::string> namespaces) {
    return a.visible(r, [&] { return namespaces; });
  }
  static ServiceError::Kind refusal(const std::function<void()>& f) {
    try {
      f();
    } catch (const ServiceError& e) {
      return e.kind();
    }
    ADD_FAILURE() << "not refused";
    return ServiceError::kInvalid;
  }

  double now = 1000;
  bool down = false;
  int token_calls = 0, access_calls = 0;
  std::map<std::string, std::string> users{{"t-alice", "alice"}, {"t-bob", "bob"}};
  std::set<std::string> grants{"alice list pods@team-a", "ops get /metrics"};
};

TEST_F(ReadAccessCache, AValidTokenIsReviewedOncePerTtlAndARefusedOneSoonerAgain) {
  KubeReadAccess a = make();
  EXPECT_EQ(a.who("t-alice").user.username, "alice");
  now += 119;
  EXPECT_EQ(a.who("t-alice").user.username, "alice");
  EXPECT_EQ(token_calls, 1);
  now += 2;  // past the 120 s a user is kept
  a.who("t-alice");
  EXPECT_EQ(token_calls, 2);
  // Unknown: refused, and not asked again for 10 s; then the API server may know it.
  EXPECT_EQ(refusal([&] { a.who("t-new"); }), ServiceError::kUnauthorized);
  EXPECT_EQ(refusal([&] { a.who("t-new"); }), ServiceError::kUnauthorized);
  EXPECT_EQ(token_calls, 3);
  users["t-new"] = "carol";
  now += 11;
  EXPECT_EQ(a.who("t-new").user.username, "carol");
  EXPECT_EQ(token_calls, 4);
  // No token: refused without asking.
  EXPECT_EQ(refusal([&] { a.who(std::string()); }), ServiceError::kUnauthorized);
  EXPECT_EQ(token_calls, 4);
}

TEST_F(ReadAccessCache, AnAllowedAnswerLastsMinutesARefusalSecondsPerUserAndQuestion) {
  KubeReadAccess a = make();
  const KubeReader alice = a.who("t-alice"), bob = a.who("t-bob");
  EXPECT_EQ(seen(a, alice, {"team-a", "team-b"}), (std::set<std::string>{"team-a"}));
  EXPECT_EQ(seen(a, bob, {"team-a", "team-b"}), std::set<std::string>{});
  const int asked = access_calls;  // each: every namespace, then each namespace
  EXPECT_EQ(asked, 6);
  // A RoleBinding for bob counts once his refusal is 30 s old; alice's answer is still kept.
  grants.insert("bob list pods@team-b");
  grants.erase("alice list pods@team-a");
  now += 29;
  EXPECT_EQ(seen(a, bob, {"team-b"}), std::set<std::string>{});
  EXPECT_EQ(access_calls, asked);
  now += 2;
  EXPECT_EQ(seen(a, bob, {"team-b"}), (std::set<std::string>{"team-b"}));
  EXPECT_EQ(seen(a, alice, {"team-a"}), (std::set<std::string>{"team-a"}));
  // ...until 300 s: then alice's removed binding counts too.
  now += 300;
  EXPECT_EQ(seen(a, alice, {"team-a"}), std::set<std::string>{});
  // Non-resource URLs: a refusal names the role that grants them.
  EXPECT_EQ(refusal([&] { a.require(alice, "/metrics"); }), ServiceError::kForbidden);
}

TEST_F(ReadAccessCache, WhoMaySeeEveryNamespaceIsAskedOnceNotPerNamespace) {
  grants.insert("alice list pods@");
  KubeReadAccess a = make();
  const KubeReader alice = a.who("t-alice");
  EXPECT_EQ(seen(a, alice, {"a", "b", "c", "d"}), std::nullopt);  // every namespace
  EXPECT_EQ(access_calls, 1);
}

TEST_F(ReadAccessCache, NoAnswerFromTheApiServerIsA503AndIsNotKept) {
  KubeReadAccess a = make();
  down = true;
  EXPECT_EQ(refusal([&] { a.who("t-alice"); }), ServiceError::kUnavailable);
  down = false;
  EXPECT_EQ(a.who("t-alice").user.username, "alice");  // asked again at once
  EXPECT_EQ(token_calls, 2);
  const KubeReader alice = a.who("t-alice");
  down = true;
  EXPECT_EQ(refusal([&] { seen(a, alice, {"team-a"}); }), ServiceError::kUnavailable);
  down = false;
  EXPECT_EQ(seen(a, alice, {"team-a"}), (std::set<std::string>{"team-a"}));
}

TEST_F(ReadAccessCache, TheCachesStayWithinTheirBoundAndAnswerTheSame) {
  KubeReadAccessOptions opt;
  opt.max_entries = 2;
  KubeReadAccess a = make(opt);
  for (int round = 0; round < 3; ++round) {
    for (int i = 0; i < 5; ++i) {
      users["t" + std::to_string(i)] = "u" + std::to_string(i);
      EXPECT_EQ(a.who("t" + std::to_string(i)).user.username, "u" + std::to_string(i));
    }
  }
  EXPECT_LE(token_calls, 15);
  EXPECT_GE(token_calls, 5);
}

TEST_F(ReadAccessCache, AnOpenApiLetsEveryoneSeeEverythingWithoutAsking) {
  KubeReadAccess a = KubeReadAccess::open();
  EXPECT_TRUE(a.is_open());
  const KubeReader r = a.who(std::string());
  EXPECT_TRUE(r.open);
  EXPECT_NO_THROW(a.require(r, "/metrics"));
  EXPECT_TRUE(a.sees_all_namespaces(r));
  EXPECT_EQ(seen(a, r, {"team-a"}), std::nullopt);
  EXPECT_EQ(a.reviews(), 0u);
}

}  // namespace
}  // namespace tessera
