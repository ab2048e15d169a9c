// `tessera serve` through restarts and a failing disk, against the real binary: what a server
// that comes back (with fewer GPUs, after its jobs ended, on a full disk) must not lose.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <algorithm>
#include <chrono>

#include <sys/mount.h>
#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "cli_util.h"
#include "model/json_depth.h"
#include "raw_socket.h"
#include "service_test_util.h"
#include "store/sqlite_db.h"

namespace tessera {
namespace {

using testing::create_tenant;
using testing::eventually;
using testing::get_job;
using testing::job_in;
using testing::kAdminToken;
using testing::ServerProcess;
using testing::submit;
using testing::TempDir;

// A small tmpfs mounted for the test (root only), to fill up at will.
class SmallDisk {
 public:
  SmallDisk(const std::string& path, int mib) : path_(path) {
    std::filesystem::create_directories(path);
    const std::string size = "size=" + std::to_string(mib) + "m";
    mounted_ = ::mount("tmpfs", path.c_str(), "tmpfs", 0, size.c_str()) == 0;
  }
  ~SmallDisk() {
    if (mounted_) ::umount2(path_.c_str(), MNT_DETACH);
  }
  SmallDisk(const SmallDisk&) = delete;
  SmallDisk& operator=(const SmallDisk&) = delete;
  bool mounted() const { return mounted_; }
  // Writes a filler file until the disk refuses more.
  void fill() {
    std::FILE* f = std::fopen((path_ + "/filler").c_str(), "ab");
    ASSERT_NE(f, nullptr);
    const std::string block(4096, 'x');
    while (std::fwrite(block.data(), 1, block.size(), f) == block.size() && std::fflush(f) == 0) {
    }
    std::fclose(f);
  }
  void free_space() { std::filesystem::remove(path_ + "/filler"); }

 private:
  std::string path_;
  bool mounted_ = false;
};

// Finding 11: restarted with fewer GPUs, every job that no longer fit was failed for good; the
// running one was not stopped, ended with exit 0 while reported `failed`, its GPUs shown free.
TEST(ServeHardening, ARestartWithFewerGpusKeepsItsJobs) {
  TempDir dir("fewer");
  auto server =
      std::make_unique<ServerProcess>(dir.str(), std::vector<std::string>{"--virtual-gpus", "4"});
  ASSERT_TRUE(server->up()) << server->log();
  std::string token;
  {
    ApiClient admin = server->client(kAdminToken);
    token = create_tenant(admin, "team-a");
  }
  std::vector<int64_t> running;
  int64_t big = 0;
  {
    ApiClient a = server->client(token);
    for (int i = 0; i < 4; ++i) {
      running.push_back(
          submit(a, "name: r" + std::to_string(i) + "\ncommand: [\"sleep\", \"3\"]\n"));
    }
    big = submit(a, "name: big\nresources: {gpus: 4}\ncommand: [\"true\"]\n");
    ASSERT_TRUE(eventually(
        [&] {
          return std::all_of(running.begin(), running.end(),
                             [&](int64_t id) { return job_in(a, id, "running"); });
        },
        10));
  }
  server->kill(SIGKILL);
  server =
      std::make_unique<ServerProcess>(dir.str(), std::vector<std::string>{"--virtual-gpus", "2"});
  ASSERT_TRUE(server->up()) << server->log();
  ApiClient a = server->client(token);
  int outside = 0;
  for (int64_t id : running) {
    const nlohmann::json j = get_job(a, id);
    EXPECT_EQ(j["state"], "running") << j.dump();
    outside += j["message"].get<std::string>().find("no longer schedules") != std::string::npos;
  }
  EXPECT_EQ(outside, 2);
  const nlohmann::json b = get_job(a, big);
  EXPECT_EQ(b["state"], "pending") << b.dump();
  EXPECT_NE(b["pending_reason"].get<std::string>().find("cannot run on this server as configured"),
            std::string::npos)
      << b.dump();
  // The two GPUs are held by the adopted jobs on them: a new job waits for one.
  const int64_t next = submit(a, "name: next\ncommand: [\"true\"]\n");
  EXPECT_TRUE(job_in(a, next, "pending"));
  EXPECT_EQ(a.post("/v1/jobs", "name: huge\nresources: {gpus: 4}\ncommand: [\"true\"]\n",
                   "application/yaml")
                .status,
            422);
  // The adopted jobs end as they ended: succeeded.
  for (int64_t id : running) {
    EXPECT_TRUE(eventually([&] { return job_in(a, id, "succeeded"); }, 10))
        << get_job(a, id).dump();
  }
  EXPECT_TRUE(eventually([&] { return job_in(a, next, "succeeded"); }, 10));
  EXPECT_TRUE(job_in(a, big, "pending"));
}

// Finding 18: after a crash, `finished_at` of a job that ended while the server was down was
// the restart time, not the time it ended.
TEST(ServeHardening, AJobThatEndedWhileTheServerWasDownKeepsItsEndTime) {
  TempDir dir("finished");
  auto server =
      std::make_unique<ServerProcess>(dir.str(), std::vector<std::string>{"--virtual-gpus", "1"});
  ASSERT_TRUE(server->up()) << server->log();
  std::string token;
  {
    ApiClient admin = server->client(kAdminToken);
    token = create_tenant(admin, "team-a");
  }
  int64_t id = 0;
  {
    ApiClient a = server->client(token);
    id = submit(a, "name: quick\ncommand: [\"sleep\", \"0.5\"]\n");
    ASSERT_TRUE(eventually([&] { return job_in(a, id, "running"); }, 10));
  }
  server->kill(SIGKILL);
  std::this_thread::sleep_for(std::chrono::seconds(2));
  server =
      std::make_unique<ServerProcess>(dir.str(), std::vector<std::string>{"--virtual-gpus", "1"});
  ASSERT_TRUE(server->up()) << server->log();
  ApiClient a = server->client(token);
  ASSERT_TRUE(eventually([&] { return job_in(a, id, "succeeded"); }, 10));
  const nlohmann::json j = get_job(a, id);
  const double ran = j["finished_at"].get<double>() - j["started_at"].get<double>();
  EXPECT_GE(ran, 0.4) << j.dump();
  EXPECT_LT(ran, 1.5) << j.dump();  // it ended 2 s before the restart learned of it
}

// Findings 2 and 12: a full disk under the database aborted the server (an uncaught error on
// COMMIT when a job ended), and again at every restart; a cancel whose write failed answered
// 500 while memory said `cancelled` and the database `pending` (the job later ran).
TEST(ServeHardening, AFullDiskDegradesTheServerWhichKeepsItsJobsAndRecovers) {
  TempDir dir("fulldisk");
  SmallDisk disk(dir.file("disk"), 8);
  if (!disk.mounted()) GTEST_SKIP() << "mounting a tmpfs needs root";
  const std::vector<std::string> args = {"--virtual-gpus", "2", "--db", dir.file("disk/t.db")};
  auto server = std::make_unique<ServerProcess>(dir.str(), args);
  ASSERT_TRUE(server->up()) << server->log();
  ApiClient admin = server->client(kAdminToken);
  std::string token = create_tenant(admin, "team-a");
  auto tenant = [&] { return server->client(token); };
  ApiClient a = tenant();
  const int64_t long_job = submit(a, "name: long\ncommand: [\"sleep\", \"60\"]\n");
  const int64_t short_job = submit(a, "name: short\ncommand: [\"sleep\", \"2\"]\n");
  // Finding 18: a job that could not write its log failed with an empty log and no reason.
  const int64_t writer = submit(a, R"(name: writer
resources: {gpus: 0}
command: ["sh", "-c", "sleep 1; echo output-after-the-disk-filled || exit 7"]
)");
  ASSERT_TRUE(eventually([&] { return job_in(a, short_job, "running"); }, 10));
  ASSERT_TRUE(eventually([&] { return job_in(a, writer, "running"); }, 10));
  ASSERT_TRUE(job_in(a, long_job, "running"));

  disk.fill();
  // Writes are refused with 503 and a reason; nothing changes.
  HttpResult r = a.post("/v1/jobs", "name: more\ncommand: [\"true\"]\n", "application/yaml");
  EXPECT_EQ(r.status, 503) << r.body;
  EXPECT_NE(r.body.find("cannot be written"), std::string::npos) << r.body;
  r = a.post("/v1/jobs/" + std::to_string(long_job) + "/cancel", "", "application/json");
  EXPECT_EQ(r.status, 503) << r.body;
  EXPECT_TRUE(job_in(a, long_job, "running")) << "memory changed though the write failed";
  r = admin.get("/healthz");
  EXPECT_EQ(r.status, 503);
  EXPECT_NE(r.body.find("degraded"), std::string::npos) << r.body;
  EXPECT_NE(admin.get("/metrics").body.find("tessera_store_writable 0"), std::string::npos);
  // A job ends while nothing can be written: the server stays up and knows it ended.
  ASSERT_TRUE(eventually([&] { return job_in(a, short_job, "succeeded"); }, 10)) << server->log();
  ASSERT_TRUE(eventually([&] { return job_in(a, writer, "failed"); }, 10));
  EXPECT_NE(get_job(a, writer)["message"].get<std::string>().find("is full"), std::string::npos)
      << get_job(a, writer).dump();
  EXPECT_EQ(admin.get("/healthz").status, 503);

  // A restart with the disk still full comes up, degraded, and adopts the running job.
  server->kill(SIGKILL);
  server = std::make_unique<ServerProcess>(dir.str(), args);
  ASSERT_TRUE(server->up()) << server->log();
  ApiClient b = tenant();
  EXPECT_EQ(server->client(kAdminToken).get("/healthz").status, 503) << server->log();
  EXPECT_TRUE(job_in(b, long_job, "running")) << get_job(b, long_job).dump();

  // Space returns: the server recovers on its own and takes writes again.
  disk.free_space();
  ASSERT_TRUE(
      eventually([&] { return server->client(kAdminToken).get("/healthz").status == 200; }, 10))
      << server->log();
  EXPECT_NE(server->log().find("DEGRADED"), std::string::npos);
  EXPECT_NE(server->log().find("takes writes again"), std::string::npos);
  const int64_t more = submit(b, "name: more\ncommand: [\"true\"]\n");
  EXPECT_GT(more, 0);
  r = b.post("/v1/jobs/" + std::to_string(long_job) + "/cancel", "", "application/json");
  EXPECT_EQ(r.status, 200) << r.body;
  ASSERT_TRUE(eventually([&] { return job_in(b, more, "succeeded"); }, 10));
  // And what it learned while degraded was written: a restart finds it.
  server->kill(SIGKILL);
  server = std::make_unique<ServerProcess>(dir.str(), args);
  ASSERT_TRUE(server->up()) << server->log();
  ApiClient c = tenant();
  EXPECT_TRUE(job_in(c, short_job, "succeeded")) << get_job(c, short_job).dump();
  EXPECT_TRUE(job_in(c, long_job, "cancelled")) << get_job(c, long_job).dump();
  EXPECT_TRUE(job_in(c, more, "succeeded")) << get_job(c, more).dump();
}

}  // namespace
}  // namespace tessera
