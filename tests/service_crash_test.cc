// Crash safety: `tessera serve` killed with SIGKILL in the middle of submissions and job
// completions, then restarted on the same database, has every accepted job exactly once, in
// the right state, and runs them all to the end.
#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "service_test_util.h"

namespace tessera {
namespace {

using testing::eventually;
using testing::json_of;
using testing::kAdminToken;
using testing::ServerProcess;
using testing::TempDir;

// Submits jobs j<k> as fast as the server answers, until it stops answering. Records what was
// accepted (201) and what was sent without an answer (it may or may not exist).
struct Submitter {
  std::mutex mu;
  std::map<std::string, int64_t> accepted;  // name -> id
  std::set<std::string> unanswered;
  int next = 0;

  void run(const std::string& addr, std::atomic<bool>& stop) {
    ClientOptions o;
    o.addr = addr;
    o.token = kAdminToken;
    o.attempts = 1;
    o.timeout_seconds = 5;
    ApiClient c(o);
    while (!stop) {
      int k = 0;
      {
        std::lock_guard lock(mu);
        k = next++;
      }
      const std::string name = "j" + std::to_string(k);
      const nlohmann::json spec{{"name", name},
                                {"tenant", "t" + std::to_string(k % 2)},
                                {"resources", {{"gpus", 0.25}}},
                                {"command", {"sh", "-c", "sleep 0.1"}}};
      const HttpResult r =
          c.post("/v1/jobs", spec.dump(), "application/json", {{"Idempotency-Key", "key-" + name}});
      {
        std::lock_guard lock(mu);
        if (r.status == 201) {
          accepted[name] = json_of(r)["id"].get<int64_t>();
        } else {
          unanswered.insert(name);
          if (r.status == 0) return;  // the server is gone
        }
      }
      // About as fast as jobs finish, so the test ends in seconds.
      std::this_thread::sleep_for(std::chrono::milliseconds(25));
    }
  }
};

nlohmann::json all_jobs(ApiClient& admin) {
  const HttpResult r = admin.get("/v1/jobs?limit=10000");
  return json_of(r)["jobs"];
}

TEST(ServiceCrash, SigkillDuringSubmissionsAndCompletionsLosesAndDuplicatesNothing) {
  TempDir dir("crash");
  const std::vector<std::string> flags = {"--virtual-gpus", "2", "--checkpoint-grace", "1"};
  Submitter sub;
  size_t running_at_kill = 0;  // jobs whose processes outlive the server
  for (int round = 0; round < 3; ++round) {
    ServerProcess server(dir.str(), flags);
    ASSERT_TRUE(server.up()) << server.log();
    std::atomic<bool> stop{false};
    std::thread t([&] { sub.run(server.addr(), stop); });
    // Submissions pour in while earlier jobs start and finish; then the server dies mid-way.
    std::this_thread::sleep_for(std::chrono::milliseconds(700 + 300 * round));
    ApiClient watcher = server.client(kAdminToken);
    running_at_kill += json_of(watcher.get("/v1/jobs?state=running"))["jobs"].size();
    server.kill(SIGKILL);
    stop = true;
    t.join();
  }
  ASSERT_GT(sub.accepted.size(), 20u);
  EXPECT_GT(running_at_kill, 0u);

  ServerProcess server(dir.str(), flags);
  ASSERT_TRUE(server.up()) << server.log();
  ApiClient admin = server.client(kAdminToken, 3);
  // A client that never heard back retries with the same key: it finds its job or makes it,
  // never a second one.
  for (const std::string& name : sub.unanswered) {
    const nlohmann::json spec{{"name", name},
                              {"tenant", "t" + std::to_string(std::stoi(name.substr(1)) % 2)},
                              {"resources", {{"gpus", 0.25}}},
                              {"command", {"sh", "-c", "sleep 0.1"}}};
    const HttpResult r = admin.post("/v1/jobs", spec.dump(), "application/json",
                                    {{"Idempotency-Key", "key-" + name}});
    ASSERT_TRUE(r.status == 200 || r.status == 201) << r.status << " " << r.body;
  }
  ASSERT_TRUE(eventually(
      [&] {
        for (const auto& j : all_jobs(admin)) {
          if (j["state"] != "succeeded") return false;
        }
        return true;
      },
      60))
      << all_jobs(admin).dump();
  const nlohmann::json jobs = all_jobs(admin);
  std::map<std::string, int64_t> by_name;
  for (const auto& j : jobs) {
    const std::string name = j["name"];
    EXPECT_EQ(by_name.count(name), 0u) << "job " << name << " exists twice";
    by_name[name] = j["id"].get<int64_t>();
    EXPECT_EQ(j["exit_code"], 0) << j.dump();
  }
  for (const auto& [name, id] : sub.accepted) {
    ASSERT_EQ(by_name.count(name), 1u) << "accepted job " << name << " was lost";
    EXPECT_EQ(by_name[name], id);
  }
  EXPECT_EQ(by_name.size(), sub.accepted.size() + sub.unanswered.size());
}

}  // namespace
}  // namespace tessera
