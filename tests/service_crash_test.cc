// Crash safety: `tessera serve` killed with SIGKILL in the middle of submissions and job
// completions, then restarted on the same database, has every accepted job exactly once, in
// the right state, and runs them all to the end.
#include <gtest/gtest.h>

#include <atomic>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "service_test_util.h"

namespace tessera {
namespace {

using testing::eventually;
using testing::get_job;
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

int64_t submit_json(ApiClient& c, const nlohmann::json& spec) {
  const HttpResult r = c.post("/v1/jobs", spec.dump(), "application/json");
  EXPECT_EQ(r.status, 201) << r.body;
  return json_of(r).value("id", int64_t{-1});
}

// The pid of a member's shell, from the file it writes when it starts.
pid_t member_pid(const std::string& dir, int64_t job, int attempt, int rank) {
  std::ifstream in(dir + "/tessera.db.jobs/jobs/" + std::to_string(job) + "/" +
                   std::to_string(attempt) + "/rank-" + std::to_string(rank) + ".pid");
  pid_t pid = 0;
  in >> pid;
  return pid;
}

// Each way a running job can be found after a restart: still running (adopted, and then
// cancellable), finished while the server was down (its exit status read from disk), or gone
// without a trace (requeued and run again).
TEST(ServiceRecovery, RunningJobsAreReconciledWithTheirProcessesAfterARestart) {
  TempDir dir("recover");
  const std::vector<std::string> flags = {"--virtual-gpus", "3", "--checkpoint-grace", "1"};
  int64_t adopted = 0, finished = 0, failed = 0, vanished = 0;
  {
    ServerProcess server(dir.str(), flags);
    ASSERT_TRUE(server.up()) << server.log();
    ApiClient admin = server.client(kAdminToken);
    auto spec = [](const std::string& name, const std::string& cmd) {
      return nlohmann::json{{"name", name}, {"tenant", "lab"}, {"command", {"sh", "-c", cmd}}};
    };
    // The two that end while the server is down wait for a file, not a fixed time: a loaded
    // machine must not let them end before the test sees them running.
    const std::string wait_go = "while [ ! -e " + dir.file("go") + " ]; do sleep 0.05; done; ";
    adopted = submit_json(admin, spec("adopted", "echo started; sleep 60"));
    finished = submit_json(admin, spec("finished", wait_go + "echo done"));
    failed = submit_json(admin, spec("failed", wait_go + "exit 7"));
    ASSERT_TRUE(eventually([&] {
      for (int64_t id : {adopted, finished, failed}) {
        if (get_job(admin, id)["state"] != "running" || member_pid(dir.str(), id, 1, 0) <= 0) {
          return false;
        }
      }
      return true;
    }));
    server.kill(SIGKILL);
  }
  // While the server is down, two of the jobs end on their own.
  const pid_t finished_pid = member_pid(dir.str(), finished, 1, 0);
  const pid_t failed_pid = member_pid(dir.str(), failed, 1, 0);
  std::ofstream(dir.file("go")) << "go\n";
  ASSERT_TRUE(eventually(
      [&] { return testing::process_gone(finished_pid) && testing::process_gone(failed_pid); }));
  {
    ServerProcess server(dir.str(), flags);
    ASSERT_TRUE(server.up()) << server.log();
    ApiClient admin = server.client(kAdminToken);
    const nlohmann::json f = get_job(admin, finished), x = get_job(admin, failed);
    EXPECT_EQ(f["state"], "succeeded") << f.dump();
    EXPECT_EQ(x["state"], "failed") << x.dump();
    EXPECT_EQ(x["exit_code"], 7);
    EXPECT_EQ(get_job(admin, adopted)["state"], "running");
    // A job whose processes vanish without an exit status while the server is down.
    vanished = submit_json(
        admin,
        nlohmann::json{{"name", "vanished"},
                       {"tenant", "lab"},
                       {"command", {"sh", "-c", "[ -e " + dir.file("second") + " ] || sleep 60"}}});
    ASSERT_TRUE(eventually([&] {
      return get_job(admin, vanished)["state"] == "running" &&
             member_pid(dir.str(), vanished, 1, 0) > 0;
    }));
    server.kill(SIGKILL);
  }
  // Its first attempt is killed; the second finds the file and succeeds at once.
  const pid_t vanished_pid = member_pid(dir.str(), vanished, 1, 0);
  std::ofstream(dir.file("second")) << "go\n";
  ::kill(-vanished_pid, SIGKILL);
  ASSERT_TRUE(eventually([&] { return testing::process_gone(vanished_pid); }));
  ServerProcess server(dir.str(), flags);
  ASSERT_TRUE(server.up()) << server.log();
  ApiClient admin = server.client(kAdminToken);
  // Requeued and run again as attempt 2.
  ASSERT_TRUE(eventually([&] { return get_job(admin, vanished)["state"] == "succeeded"; }, 10))
      << get_job(admin, vanished).dump();
  EXPECT_EQ(get_job(admin, vanished)["attempts"], 2);
  // The adopted job (no longer the server's child) is still watched and can be cancelled.
  const pid_t pid = member_pid(dir.str(), adopted, 1, 0);
  ASSERT_GT(pid, 0);
  EXPECT_EQ(::kill(pid, 0), 0);
  EXPECT_EQ(
      admin.post("/v1/jobs/" + std::to_string(adopted) + "/cancel", "", "application/json").status,
      200);
  ASSERT_TRUE(eventually([&] { return get_job(admin, adopted)["finished_at"].is_number(); }, 10));
  EXPECT_TRUE(eventually([&] { return testing::process_gone(pid); }, 5));
  EXPECT_EQ(get_job(admin, adopted)["state"], "cancelled");
}

}  // namespace
}  // namespace tessera
