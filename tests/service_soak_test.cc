// Soak: submissions, cancels, log reads, server kills and restarts, all at once,
// for TESSERA_SOAK_SECONDS (60 by default; the figures in the note come from 600).
// Then: no accepted job lost or run twice, the server's memory bounded, no descriptor leaked.
// It prints one line of figures (SOAK ...) for the note.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "service_test_util.h"

namespace tessera {
namespace {

using testing::json_of;
using testing::kAdminToken;
using testing::rss_mib;
using testing::ServerProcess;
using testing::TempDir;

size_t open_fds(pid_t pid) {
  size_t n = 0;
  std::error_code ec;
  for (std::filesystem::directory_iterator it("/proc/" + std::to_string(pid) + "/fd", ec), end;
       !ec && it != end; it.increment(ec)) {
    ++n;
  }
  return n;
}

// The server, restarted at will; clients ask for its current address.
class RestartingServer {
 public:
  explicit RestartingServer(std::string dir) : dir_(std::move(dir)) { start(); }
  void start() {
    std::lock_guard lock(mu_);
    server_ = std::make_unique<ServerProcess>(
        dir_, std::vector<std::string>{"--virtual-gpus", "4", "--checkpoint-grace", "1"});
    ++starts_;
  }
  void kill(int sig) {
    std::lock_guard lock(mu_);
    server_->kill(sig);
  }
  std::string addr() {
    std::lock_guard lock(mu_);
    return server_->addr();
  }
  pid_t pid() {
    std::lock_guard lock(mu_);
    return server_->pid();
  }
  bool up() {
    std::lock_guard lock(mu_);
    return server_->up();
  }
  std::string log() {
    std::lock_guard lock(mu_);
    return server_->log();
  }
  ApiClient client(const std::string& token) {
    ClientOptions o;
    o.addr = addr();
    o.token = token;
    return ApiClient(o);
  }
  int starts() const { return starts_; }

 private:
  std::string dir_;
  std::mutex mu_;
  std::unique_ptr<ServerProcess> server_;
  int starts_ = 0;
};

TEST(ServiceSoak, LoadKillsAndRestartsLoseNothingRunNothingTwiceAndLeakNothing) {
  const char* env = std::getenv("TESSERA_SOAK_SECONDS");
  const double seconds = env != nullptr ? std::atof(env) : 60.0;
  TempDir dir("soak");
  // Every job appends "<id> <attempt>" to its own file here (any tenant uid may write).
  const std::string marks = dir.file("marks");
  std::filesystem::create_directories(marks);
  ::chmod(dir.str().c_str(), 0755);
  ::chmod(marks.c_str(), 01777);
  RestartingServer server(dir.str());
  ASSERT_TRUE(server.up()) << server.log();
  std::vector<std::string> tokens;
  {
    ApiClient admin = server.client(kAdminToken);
    for (const char* t : {"team-a", "team-b", "team-c", "team-d"}) {
      const HttpResult r =
          admin.post("/v1/tenants", nlohmann::json{{"name", t}}.dump(), "application/json");
      ASSERT_EQ(r.status, 201) << r.body;
      tokens.push_back(json_of(r)["token"]);
    }
  }

  std::mutex mu;
  std::map<std::string, int64_t> accepted;  // idempotency key -> job id
  std::atomic<bool> stop{false};
  std::atomic<int64_t> submissions{0}, cancels{0}, log_reads{0}, refused{0}, unanswered{0};
  std::atomic<int64_t> peak_rss{0};
  auto known_ids = [&] {
    std::lock_guard lock(mu);
    std::vector<int64_t> ids;
    for (const auto& [k, id] : accepted) ids.push_back(id);
    return ids;
  };

  // team-d's arrays and dependency chains, submitted and cancelled whole in a loop (each costs
  // its tasks in submissions and in memory only once; a cancelled chain head cancels its links).
  const std::string looper = tokens.back();
  tokens.pop_back();
  std::atomic<int64_t> array_tasks{0}, array_cancels{0};
  std::vector<std::vector<int64_t>> chains;  // head first; under mu

  std::vector<std::thread> threads;
  threads.reserve(tokens.size() + 4);
  threads.emplace_back([&] {  // arrays of 100 tasks, cancelled at once
    while (!stop) {
      ApiClient c = server.client(looper);
      const HttpResult r = c.post(
          "/v1/jobs",
          nlohmann::json{{"name", "arr"}, {"command", {"sleep", "30"}}, {"array", "0-99"}}.dump(),
          "application/json");
      if (r.status == 201) {
        array_tasks += 100;
        const std::string id = std::to_string(json_of(r).value("id", int64_t{0}));
        if (c.post("/v1/jobs/" + id + "/cancel?array=true", "", "application/json").status == 200) {
          ++array_cancels;
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    }
  });
  threads.emplace_back([&] {  // chains of 30 after_ok links, cancelled from the head
    while (!stop) {
      ApiClient c = server.client(looper);
      std::vector<int64_t> chain;
      for (int k = 0; k <= 30; ++k) {
        nlohmann::json spec{{"name", "link"}, {"command", {"sleep", "30"}}};
        if (!chain.empty()) spec["after_ok"] = {chain.back()};
        const HttpResult r = c.post("/v1/jobs", spec.dump(), "application/json");
        if (r.status != 201) break;
        chain.push_back(json_of(r).value("id", int64_t{0}));
      }
      if (!chain.empty() && c.post("/v1/jobs/" + std::to_string(chain.front()) + "/cancel?force=1",
                                   "", "application/json")
                                    .status == 200) {
        std::lock_guard lock(mu);
        chains.push_back(std::move(chain));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(2000));
    }
  });
  for (size_t t = 0; t < tokens.size(); ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(static_cast<unsigned>(t) + 1);
      for (int n = 0; !stop; ++n) {
        const std::string key = "soak-" + std::to_string(t) + "-" + std::to_string(n);
        const int members = 1 + static_cast<int>(rng() % 2);
        const nlohmann::json spec{
            {"name", "s" + std::to_string(n)},
            {"gang", {{"min", members}, {"max", members}}},
            {"command",
             {"sh", "-c",
              "echo \"$TESSERA_JOB_ID $TESSERA_ATTEMPT $RANK\" >> " + marks +
                  "/$TESSERA_JOB_ID; echo running; sleep 0." + std::to_string(1 + rng() % 8)}}};
        // A submission is retried with its key until it is answered (the server may be
        // down): it must then name one job, whichever try made it.
        for (int attempt = 0; !stop || attempt == 0; ++attempt) {
          ApiClient c = server.client(tokens[t]);
          const HttpResult r =
              c.post("/v1/jobs", spec.dump(), "application/json", {{"Idempotency-Key", key}});
          if (r.status == 200 || r.status == 201) {
            std::lock_guard lock(mu);
            const int64_t id = json_of(r)["id"];
            auto [it, fresh] = accepted.emplace(key, id);
            EXPECT_EQ(it->second, id) << "key " << key << " named two jobs";
            ++submissions;
            break;
          }
          if (r.status != 0) {
            ++refused;  // 429 (limits) or 503 while degraded: not accepted
            break;
          }
          ++unanswered;
          std::this_thread::sleep_for(std::chrono::milliseconds(100));
        }
        // About five jobs a second in all: what four GPUs get through, so the queue stays short.
        std::this_thread::sleep_for(std::chrono::milliseconds(300 + rng() % 600));
      }
    });
  }
  threads.emplace_back([&] {  // cancels, some forced
    std::mt19937 rng(7);
    while (!stop) {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      const auto ids = known_ids();
      if (ids.empty()) continue;
      const int64_t id = ids[rng() % ids.size()];
      ApiClient admin = server.client(kAdminToken);
      const HttpResult r =
          admin.post("/v1/jobs/" + std::to_string(id) + "/cancel" + (rng() % 2 ? "?force=1" : ""),
                     "", "application/json");
      if (r.status == 200) ++cancels;
    }
  });
  threads.emplace_back([&] {  // log reads
    std::mt19937 rng(11);
    while (!stop) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      const auto ids = known_ids();
      if (ids.empty()) continue;
      ApiClient admin = server.client(kAdminToken);
      const HttpResult r =
          admin.get("/v1/jobs/" + std::to_string(ids[rng() % ids.size()]) + "/logs?tail_bytes=0");
      if (r.status == 200) ++log_reads;
    }
  });

  // Kills and restarts: SIGKILL and SIGTERM in turn, every few seconds, until the last fifth
  // of the run, which one server serves throughout (for the descriptor count).
  const auto begin = std::chrono::steady_clock::now();
  auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  };
  int kills = 0;
  std::mt19937 rng(3);
  while (elapsed() < seconds * 0.8) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2000 + rng() % 4000));
    peak_rss = std::max<int64_t>(peak_rss, rss_mib(server.pid()));
    server.kill(kills % 2 == 0 ? SIGKILL : SIGTERM);
    ++kills;
    server.start();
    ASSERT_TRUE(server.up()) << server.log();
  }
  std::this_thread::sleep_for(std::chrono::seconds(1));
  const size_t fds_before = open_fds(server.pid());
  while (elapsed() < seconds) {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    peak_rss = std::max<int64_t>(peak_rss, rss_mib(server.pid()));
  }
  stop = true;
  for (std::thread& t : threads) t.join();

  // Everything accepted ends: succeeded or cancelled, nothing failed, nothing lost.
  ApiClient admin = server.client(kAdminToken);
  std::map<int64_t, nlohmann::json> final_rows;
  const auto ids = known_ids();
  ASSERT_TRUE(testing::eventually(
      [&] {
        for (int64_t id : ids) {
          if (final_rows.count(id) != 0) continue;
          const nlohmann::json j = json_of(admin.get("/v1/jobs/" + std::to_string(id)));
          const std::string state = j.value("state", "");
          if (state == "succeeded" || state == "cancelled" || state == "failed") {
            final_rows[id] = j;
          }
        }
        return final_rows.size() == ids.size();
      },
      60))
      << final_rows.size() << " of " << ids.size() << " ended\n"
      << server.log();
  std::map<std::string, int> states;
  for (const auto& [id, j] : final_rows) {
    ++states[j["state"]];
    EXPECT_NE(j["state"], "failed") << j.dump();
    // Each attempt ran once: its members' lines are distinct, and no attempt beyond the
    // recorded ones ran.
    std::ifstream in(marks + "/" + std::to_string(id));
    std::set<std::string> lines;
    std::string line;
    while (std::getline(in, line)) {
      EXPECT_TRUE(lines.insert(line).second) << "job " << id << " ran '" << line << "' twice";
      std::istringstream fields(line);
      int64_t job = 0, attempt = 0;
      fields >> job >> attempt;
      EXPECT_EQ(job, id);
      EXPECT_LE(attempt, j["attempts"].get<int64_t>()) << j.dump();
    }
    if (j["state"] == "succeeded") {
      EXPECT_FALSE(lines.empty()) << j.dump();
    }
  }
  // Every link of a chain whose head was cancelled is cancelled too, whatever the restarts.
  size_t links = 0;
  for (const std::vector<int64_t>& chain : chains) {
    for (const int64_t id : chain) {
      ++links;
      std::string state;
      EXPECT_TRUE(testing::eventually(
          [&] {
            state = json_of(admin.get("/v1/jobs/" + std::to_string(id))).value("state", "");
            return state == "cancelled";
          },
          20))
          << "job " << id << " of a chain from " << chain.front() << " is " << state;
    }
  }
  // Idle again, the last server holds what it held before the load: no descriptor leaked.
  std::this_thread::sleep_for(std::chrono::seconds(2));
  const size_t fds_after = open_fds(server.pid());
  EXPECT_LE(fds_after, fds_before + 4) << fds_before << " -> " << fds_after;
  const int64_t rss_end = rss_mib(server.pid());
  peak_rss = std::max<int64_t>(peak_rss, rss_end);
  EXPECT_LT(peak_rss.load(), 256) << "MiB";
  std::cout << "SOAK seconds=" << seconds << " jobs=" << ids.size()
            << " succeeded=" << states["succeeded"] << " cancelled=" << states["cancelled"]
            << " failed=" << states["failed"] << " cancels=" << cancels
            << " log_reads=" << log_reads << " refused=" << refused
            << " unanswered_tries=" << unanswered << " server_starts=" << server.starts()
            << " peak_rss_mib=" << peak_rss << " array_tasks=" << array_tasks
            << " array_cancels=" << array_cancels << " chains=" << chains.size()
            << " chain_jobs=" << links << " fds_before=" << fds_before << " fds_after=" << fds_after
            << "\n";
}

}  // namespace
}  // namespace tessera
