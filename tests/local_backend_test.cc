#include "backend/local_backend.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "service_test_util.h"

namespace tessera {
namespace {

using testing::process_gone;
namespace fs = std::filesystem;
using namespace std::chrono_literals;

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Polls `done` every 20 ms for up to `limit`; true once it holds.
bool eventually(const std::function<bool()>& done,
                std::chrono::milliseconds limit = std::chrono::milliseconds(10000)) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    if (done()) return true;
    std::this_thread::sleep_for(20ms);
  }
  return done();
}

// The children of this process, across all its threads.
std::set<int64_t> own_children(bool& supported) {
  std::set<int64_t> out;
  supported = false;
  std::error_code ec;
  for (const auto& task : fs::directory_iterator("/proc/self/task", ec)) {
    std::ifstream in(task.path() / "children");
    if (!in) continue;
    supported = true;
    int64_t pid = 0;
    while (in >> pid) out.insert(pid);
  }
  return out;
}

// The first child of `pid` whose command name is `comm`, or 0.
int64_t child_named(int64_t pid, const std::string& comm) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/task/" + std::to_string(pid) + "/children");
  int64_t child = 0;
  while (in >> child) {
    std::string name = read_file("/proc/" + std::to_string(child) + "/comm");
    if (!name.empty() && name.back() == '\n') name.pop_back();
    if (name == comm) return child;
  }
  return 0;
}

class LocalBackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    static std::atomic<int> counter{0};
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    root_ = (fs::temp_directory_path() / ("tessera-local-backend-" + std::to_string(getpid()) +
                                          "-" + std::to_string(counter++) + "-" + info->name()))
                .string();
    fs::remove_all(root_);
  }

  void TearDown() override {
    // A failed test must not leave processes behind.
    for (const MemberHandle& h : launched_) {
      if (h.pid > 1) kill(-static_cast<pid_t>(h.pid), SIGKILL);
    }
    for (const MemberHandle& h : launched_) waitpid(static_cast<pid_t>(h.pid), nullptr, 0);
    std::error_code ec;
    fs::remove_all(root_, ec);
  }

  LaunchSpec spec(std::vector<std::string> command, int members = 1) {
    LaunchSpec s;
    s.job = 42;
    s.attempt = 1;
    s.name = "train";
    s.tenant = "lab";
    s.command = std::move(command);
    s.master_port = 29500;
    for (int r = 0; r < members; ++r) s.members.push_back(MemberLaunch{r, {r}, 1000});
    return s;
  }

  std::vector<MemberHandle> launch(LocalBackend& backend, const LaunchSpec& s) {
    std::vector<MemberHandle> handles = backend.launch(s);
    launched_.insert(launched_.end(), handles.begin(), handles.end());
    return handles;
  }

  // Polls until no member runs (or the deadline passes) and returns the last answer.
  std::vector<MemberStatus> wait_done(LocalBackend& backend, const LaunchSpec& s,
                                      const std::vector<MemberHandle>& handles) {
    std::vector<MemberStatus> st;
    eventually([&] {
      st = backend.poll(s.job, s.attempt, handles);
      for (const MemberStatus& m : st) {
        if (m.phase == MemberPhase::kRunning) return false;
      }
      return true;
    });
    return st;
  }

  std::string root_;
  std::vector<MemberHandle> launched_;
};

TEST_F(LocalBackendTest, GangMembersGetRankWorldGpusAndPort) {
  LocalBackend backend(root_);
  const LaunchSpec s = spec({"sh", "-c",
                             "echo rank=$RANK local=$LOCAL_RANK world=$WORLD_SIZE "
                             "cvd=$CUDA_VISIBLE_DEVICES port=$MASTER_PORT addr=$MASTER_ADDR "
                             "frac=${TESSERA_GPU_FRACTION:-none} job=$TESSERA_JOB_ID "
                             "name=$TESSERA_JOB_NAME tenant=$TESSERA_TENANT "
                             "attempt=$TESSERA_ATTEMPT; pwd"},
                            2);
  const std::vector<MemberHandle> handles = launch(backend, s);
  ASSERT_EQ(handles.size(), 2u);
  EXPECT_EQ(handles[0].rank, 0);
  EXPECT_EQ(handles[1].rank, 1);
  EXPECT_GT(handles[0].start_ticks, 0);

  const std::vector<MemberStatus> st = wait_done(backend, s, handles);
  ASSERT_EQ(st.size(), 2u);
  const std::string dir = backend.attempt_dir(s.job, s.attempt);
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(st[r].rank, r);
    EXPECT_EQ(st[r].phase, MemberPhase::kExited);
    EXPECT_EQ(st[r].exit_code, 0);
    const std::string log = read_file(backend.log_path(s.job, s.attempt, r));
    const std::string r_s = std::to_string(r);
    EXPECT_NE(log.find("rank=" + r_s + " local=" + r_s + " world=2 cvd=" + r_s +
                       " port=29500 addr=127.0.0.1 frac=none job=42 name=train tenant=lab "
                       "attempt=1\n"),
              std::string::npos)
        << log;
    // The member runs in the attempt directory.
    EXPECT_NE(log.find(dir + "\n"), std::string::npos) << log;
    // The shell wrote its status over the placeholder's start: the first line is the status.
    EXPECT_EQ(read_file(dir + "/rank-" + r_s + ".exit").substr(0, 2), "0\n");
  }
}

TEST_F(LocalBackendTest, FractionAndUserEnvButReservedNamesWin) {
  LocalBackend backend(root_);
  LaunchSpec s = spec({"sh", "-c",
                       "echo frac=$TESSERA_GPU_FRACTION mine=$MY_SETTING rank=$RANK "
                       "cvd=[$CUDA_VISIBLE_DEVICES]"});
  s.members = {MemberLaunch{0, {3}, 500}, MemberLaunch{1, {}, 250}};
  s.env = {{"MY_SETTING", "a b=c"}, {"RANK", "99"}, {"MY_SETTING", "last wins"}};
  const std::vector<MemberHandle> handles = launch(backend, s);
  const std::vector<MemberStatus> st = wait_done(backend, s, handles);
  ASSERT_EQ(st.size(), 2u);
  EXPECT_EQ(st[0].exit_code, 0);
  EXPECT_EQ(st[1].exit_code, 0);
  const std::string log0 = read_file(backend.log_path(s.job, s.attempt, 0));
  const std::string log1 = read_file(backend.log_path(s.job, s.attempt, 1));
  EXPECT_EQ(log0, "frac=0.5 mine=last wins rank=0 cvd=[3]\n");
  EXPECT_EQ(log1, "frac=0.25 mine=last wins rank=1 cvd=[]\n");
}

TEST_F(LocalBackendTest, ExitCodePropagates) {
  LocalBackend backend(root_);
  const LaunchSpec s = spec({"sh", "-c", "exit 3"});
  const std::vector<MemberHandle> handles = launch(backend, s);
  const std::vector<MemberStatus> st = wait_done(backend, s, handles);
  ASSERT_EQ(st.size(), 1u);
  EXPECT_EQ(st[0].phase, MemberPhase::kExited);
  EXPECT_EQ(st[0].exit_code, 3);
  // A second poll, after the member was reaped, gives the same answer.
  const std::vector<MemberStatus> again = backend.poll(s.job, s.attempt, handles);
  EXPECT_EQ(again[0].phase, MemberPhase::kExited);
  EXPECT_EQ(again[0].exit_code, 3);
}

TEST_F(LocalBackendTest, StatusOfAChildThatCouldNotWriteItsFileIsRemembered) {
  LocalBackend backend(root_);
  const LaunchSpec s = spec({"sh", "-c", "sleep 0.3; exit 8"});
  const std::vector<MemberHandle> handles = launch(backend, s);
  // A non-empty directory where the exit file was: the status the shell writes (to the file
  // it was handed, now nameless) cannot be read, so only waitpid knows it, and only the first
  // poll can learn it from waitpid.
  const std::string exit_file = backend.attempt_dir(s.job, s.attempt) + "/rank-0.exit";
  fs::remove(exit_file);
  fs::create_directories(exit_file + "/keep");
  const std::vector<MemberStatus> st = wait_done(backend, s, handles);
  EXPECT_EQ(st[0].phase, MemberPhase::kExited);
  EXPECT_EQ(st[0].exit_code, 8);
  const std::vector<MemberStatus> again = backend.poll(s.job, s.attempt, handles);
  EXPECT_EQ(again[0].phase, MemberPhase::kExited);
  EXPECT_EQ(again[0].exit_code, 8);
}

TEST_F(LocalBackendTest, MissingCommandExits127AndLogNamesIt) {
  LocalBackend backend(root_);
  const LaunchSpec s = spec({"tessera-no-such-command-xyz", "arg"});
  const std::vector<MemberHandle> handles = launch(backend, s);
  const std::vector<MemberStatus> st = wait_done(backend, s, handles);
  ASSERT_EQ(st.size(), 1u);
  EXPECT_EQ(st[0].phase, MemberPhase::kExited);
  EXPECT_EQ(st[0].exit_code, 127);
  const std::string log = read_file(backend.log_path(s.job, s.attempt, 0));
  EXPECT_NE(log.find("tessera-no-such-command-xyz"), std::string::npos) << log;
}

TEST_F(LocalBackendTest, SigtermEndsSleepingGangWith143) {
  LocalBackend backend(root_);
  const LaunchSpec s = spec({"sleep", "30"}, 2);
  const std::vector<MemberHandle> handles = launch(backend, s);
  // Once the command runs (one asked for earlier waits for it: the test below).
  for (const MemberHandle& h : handles) {
    ASSERT_TRUE(eventually([&] { return child_named(h.pid, "sleep") != 0; }));
  }
  for (const MemberStatus& m : backend.poll(s.job, s.attempt, handles)) {
    EXPECT_EQ(m.phase, MemberPhase::kRunning);
  }
  const auto t0 = std::chrono::steady_clock::now();
  backend.signal(s.job, s.attempt, handles, SIGTERM);
  const std::vector<MemberStatus> st = wait_done(backend, s, handles);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 3s);
  for (const MemberStatus& m : st) {
    EXPECT_EQ(m.phase, MemberPhase::kExited);
    EXPECT_EQ(m.exit_code, 143);
  }
  // Signalling members that are gone is harmless.
  EXPECT_NO_THROW(backend.signal(s.job, s.attempt, handles, SIGTERM));
}

// A stop asked for while a member starts still reaches its command: at once after the launch
// (before its shell has set anything up) and just after its shell wrote its pid (as it starts
// the command). Each moment lasts a fraction of a millisecond, hence many members.
TEST_F(LocalBackendTest, ATermSentWhileAMemberStartsStillStopsItsCommand) {
  LocalBackend backend(root_);
  for (uint32_t attempt = 1; attempt <= 40; ++attempt) {
    LaunchSpec s = spec({"sleep", "30"});
    s.attempt = attempt;
    const std::vector<MemberHandle> handles = launch(backend, s);
    if (attempt % 2 == 0) {
      const std::string pid_file = backend.attempt_dir(s.job, s.attempt) + "/rank-0.pid";
      const std::string pid_line = std::to_string(handles[0].pid) + "\n";
      const auto deadline = std::chrono::steady_clock::now() + 10s;
      while (read_file(pid_file).rfind(pid_line, 0) != 0 &&
             std::chrono::steady_clock::now() < deadline) {
        std::this_thread::yield();
      }
    }
    backend.signal(s.job, s.attempt, handles, SIGTERM);
    // Ended by the TERM (143, as its shell recorded it), not still sleeping.
    const std::vector<MemberStatus> st = wait_done(backend, s, handles);
    ASSERT_EQ(st[0].phase, MemberPhase::kExited) << "attempt " << attempt;
    ASSERT_EQ(st[0].exit_code, 143) << "attempt " << attempt;
  }
}

TEST_F(LocalBackendTest, SigkillStopsTermIgnoringGroupWithGrandchild) {
  LocalBackend backend(root_);
  // The inner shell and the sleep it starts in the background both ignore TERM.
  const LaunchSpec s =
      spec({"sh", "-c", "trap '' TERM; sleep 30 & echo $! > grandchild.pid; wait"});
  const std::vector<MemberHandle> handles = launch(backend, s);
  const std::string pid_file = backend.attempt_dir(s.job, s.attempt) + "/grandchild.pid";
  int64_t grandchild = 0;
  ASSERT_TRUE(eventually([&] {
    std::ifstream in(pid_file);
    return static_cast<bool>(in >> grandchild);
  }));
  ASSERT_GT(grandchild, 1);
  EXPECT_FALSE(process_gone(grandchild));

  backend.signal(s.job, s.attempt, handles, SIGTERM);
  std::this_thread::sleep_for(200ms);
  EXPECT_EQ(backend.poll(s.job, s.attempt, handles)[0].phase, MemberPhase::kRunning);
  EXPECT_FALSE(process_gone(grandchild));

  backend.signal(s.job, s.attempt, handles, SIGKILL);
  const std::vector<MemberStatus> st = wait_done(backend, s, handles);
  EXPECT_EQ(st[0].phase, MemberPhase::kLost);
  EXPECT_TRUE(eventually([&] { return process_gone(grandchild); }, 5000ms));
}

TEST_F(LocalBackendTest, SecondInstancePollsMembersOfTheFirst) {
  LocalBackend first(root_);
  const LaunchSpec s = spec({"sh", "-c", "sleep 0.3; exit 5"});
  const std::vector<MemberHandle> handles = launch(first, s);
  LocalBackend second(root_);
  EXPECT_EQ(second.poll(s.job, s.attempt, handles)[0].phase, MemberPhase::kRunning);
  const std::vector<MemberStatus> st = wait_done(second, s, handles);
  EXPECT_EQ(st[0].phase, MemberPhase::kExited);
  EXPECT_EQ(st[0].exit_code, 5);
  // The first instance did not reap it, yet still learns how it ended (from the file).
  const std::vector<MemberStatus> from_first = first.poll(s.job, s.attempt, handles);
  EXPECT_EQ(from_first[0].phase, MemberPhase::kExited);
  EXPECT_EQ(from_first[0].exit_code, 5);
}

TEST_F(LocalBackendTest, AdoptsMembersThatAreNotItsChildren) {
  // Launch from a forked process that exits at once, as a crashed server would: the members
  // are then nobody's child here, and only /proc and the exit file tell their state.
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  const pid_t launcher = fork();
  ASSERT_GE(launcher, 0);
  if (launcher == 0) {
    close(fds[0]);
    MemberHandle h;
    try {
      LocalBackend backend(root_);
      h = backend.launch(spec({"sh", "-c", "sleep 0.4; exit 4"}))[0];
    } catch (...) {
      _exit(1);
    }
    const ssize_t n = write(fds[1], &h, sizeof(h));
    _exit(n == static_cast<ssize_t>(sizeof(h)) ? 0 : 1);
  }
  close(fds[1]);
  MemberHandle h;
  const ssize_t n = read(fds[0], &h, sizeof(h));
  close(fds[0]);
  int status = 0;
  ASSERT_EQ(waitpid(launcher, &status, 0), launcher);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  ASSERT_EQ(n, static_cast<ssize_t>(sizeof(h)));
  launched_.push_back(h);

  LocalBackend backend(root_);
  bool supported = false;
  const std::set<int64_t> children = own_children(supported);
  if (supported) {
    EXPECT_EQ(children.count(h.pid), 0u);
  }
  EXPECT_EQ(backend.poll(42, 1, {h})[0].phase, MemberPhase::kRunning);
  std::vector<MemberStatus> st;
  ASSERT_TRUE(eventually([&] {
    st = backend.poll(42, 1, {h});
    return st[0].phase != MemberPhase::kRunning;
  }));
  EXPECT_EQ(st[0].phase, MemberPhase::kExited);
  EXPECT_EQ(st[0].exit_code, 4);
}

TEST_F(LocalBackendTest, RecycledPidIsNotTheMember) {
  LocalBackend backend(root_);
  const LaunchSpec s = spec({"sleep", "30"});
  const std::vector<MemberHandle> handles = launch(backend, s);
  MemberHandle other = handles[0];
  other.start_ticks += 1;  // same pid, another start time: some other process
  EXPECT_EQ(backend.poll(s.job, s.attempt, {other})[0].phase, MemberPhase::kLost);
  // Nor is it signalled: the real process keeps running.
  backend.signal(s.job, s.attempt, {other}, SIGKILL);
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(backend.poll(s.job, s.attempt, handles)[0].phase, MemberPhase::kRunning);
  // With an exit file present, the ended member's status is that file's.
  std::ofstream(backend.attempt_dir(s.job, s.attempt) + "/rank-0.exit") << "9\n";
  const MemberStatus st = backend.poll(s.job, s.attempt, {other})[0];
  EXPECT_EQ(st.phase, MemberPhase::kExited);
  EXPECT_EQ(st.exit_code, 9);
}

TEST_F(LocalBackendTest, GonePidIsDecidedByTheExitFile) {
  LocalBackend backend(root_);
  // A pid that existed and is gone: a reaped child of ours.
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) _exit(0);
  ASSERT_EQ(waitpid(child, nullptr, 0), child);
  const MemberHandle h{2, child, 12345};

  EXPECT_EQ(backend.poll(7, 3, {h})[0].phase, MemberPhase::kLost);
  fs::create_directories(backend.attempt_dir(7, 3));
  const std::string exit_file = backend.attempt_dir(7, 3) + "/rank-2.exit";
  std::ofstream(exit_file) << "garbage\n";
  EXPECT_EQ(backend.poll(7, 3, {h})[0].phase, MemberPhase::kLost);
  std::ofstream(exit_file) << "7\n";
  const MemberStatus st = backend.poll(7, 3, {h})[0];
  EXPECT_EQ(st.rank, 2);
  EXPECT_EQ(st.phase, MemberPhase::kExited);
  EXPECT_EQ(st.exit_code, 7);
  // Invalid pids are never waited for nor signalled (kill(-0) would hit our own group).
  const MemberHandle zero{0, 0, 0};
  EXPECT_EQ(backend.poll(1, 1, {zero})[0].phase, MemberPhase::kLost);
  EXPECT_NO_THROW(backend.signal(1, 1, {zero}, SIGTERM));
}

// A new database restarted job ids at 1, and new jobs appended to the
// old jobs' logs in their directories.
TEST_F(LocalBackendTest, AJobDirectoryOfAnotherDatabaseIsNeverReused) {
  LocalBackendOptions a;
  a.owner = "aaaa";
  LocalBackend first(root_, a);
  const LaunchSpec s = spec({"sh", "-c", "echo old secret"});
  const auto h = launch(first, s);
  ASSERT_TRUE(eventually(
      [&] { return first.poll(s.job, s.attempt, h)[0].phase != MemberPhase::kRunning; }));
  LocalBackendOptions b;
  b.owner = "bbbb";
  LocalBackend second(root_, b);
  try {
    launch(second, s);
    FAIL() << "launched into another database's job directory";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("another database (id aaaa"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(read_file(first.log_path(s.job, s.attempt, 0)), "old secret\n");
  // Its own database's next attempt uses it as before.
  LaunchSpec next = s;
  next.attempt = 2;
  EXPECT_NO_THROW(launch(first, next));
}

TEST_F(LocalBackendTest, FailedLaunchKillsStartedMembers) {
  LocalBackend backend(root_);
  LaunchSpec s = spec({"sleep", "30"}, 2);
  // Rank 1's log cannot be opened, so its spawn fails after rank 0 started.
  fs::create_directories(backend.log_path(s.job, s.attempt, 1));
  bool supported = false;
  const std::set<int64_t> before = own_children(supported);
  try {
    launch(backend, s);
    FAIL() << "launch did not throw";
  } catch (const std::runtime_error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("job 42"), std::string::npos) << what;
    EXPECT_NE(what.find("rank 1"), std::string::npos) << what;
    EXPECT_NE(what.find(strerror(EISDIR)), std::string::npos) << what;
  }
  if (supported) {
    EXPECT_EQ(own_children(supported), before);
  }
  // Rank 0 started and was killed before it could record anything.
  EXPECT_TRUE(fs::exists(backend.log_path(s.job, s.attempt, 0)));
  // (The exit file is a placeholder holding a disk block for it, with no number in it.)
  const std::string exit_file = read_file(backend.attempt_dir(s.job, s.attempt) + "/rank-0.exit");
  EXPECT_EQ(exit_file.find_first_of("0123456789"), std::string::npos) << exit_file;
}

TEST_F(LocalBackendTest, LaunchRejectsEmptyCommandAndEmptyGang) {
  LocalBackend backend(root_);
  EXPECT_THROW(backend.launch(spec({})), std::runtime_error);
  LaunchSpec s = spec({"true"});
  s.members.clear();
  EXPECT_THROW(backend.launch(s), std::runtime_error);
  s = spec({"true"});
  s.members[0].gpu_milli = 0;
  EXPECT_THROW(backend.launch(s), std::runtime_error);
  EXPECT_FALSE(fs::exists(backend.attempt_dir(42, 1) + "/rank-0.log"));
}

TEST_F(LocalBackendTest, ConstructorThrowsNamingRootItCannotCreate) {
  fs::create_directories(root_);
  const std::string file = root_ + "/plain-file";
  std::ofstream(file) << "x";
  const std::string bad = file + "/sub";
  try {
    LocalBackend backend(bad);
    FAIL() << "constructor did not throw";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(bad), std::string::npos) << e.what();
  }
}

TEST_F(LocalBackendTest, PathsFollowTheLayoutUnderAnAbsoluteRoot) {
  fs::create_directories(root_);
  LocalBackend backend(root_ + "/");
  EXPECT_EQ(backend.root(), root_);
  EXPECT_TRUE(fs::is_directory(root_));
  EXPECT_EQ(backend.attempt_dir(5, 2), root_ + "/jobs/5/2");
  EXPECT_EQ(backend.log_path(5, 2, 3), root_ + "/jobs/5/2/rank-3.log");

  // A relative root is resolved once, so members (which run elsewhere) find their files.
  const fs::path cwd = fs::current_path();
  fs::current_path(root_);
  LocalBackend relative("rel/root");
  fs::current_path(cwd);
  EXPECT_EQ(relative.root(), root_ + "/rel/root");
  const LaunchSpec s = spec({"true"});
  const std::vector<MemberHandle> handles = launch(relative, s);
  const std::vector<MemberStatus> st = wait_done(relative, s, handles);
  EXPECT_EQ(st[0].phase, MemberPhase::kExited);
  EXPECT_EQ(st[0].exit_code, 0);
  EXPECT_TRUE(fs::exists(root_ + "/rel/root/jobs/42/1/rank-0.exit"));
}

TEST_F(LocalBackendTest, ConcurrentPollsAgree) {
  LocalBackend backend(root_);
  const LaunchSpec s = spec({"sh", "-c", "sleep 0.1; exit 6"}, 2);
  const std::vector<MemberHandle> handles = launch(backend, s);
  std::vector<std::vector<MemberStatus>> results(4);
  std::vector<std::thread> threads;
  for (auto& result : results) {
    threads.emplace_back([&] { result = wait_done(backend, s, handles); });
  }
  for (std::thread& t : threads) t.join();
  for (const auto& result : results) {
    ASSERT_EQ(result.size(), 2u);
    for (const MemberStatus& m : result) {
      EXPECT_EQ(m.phase, MemberPhase::kExited);
      EXPECT_EQ(m.exit_code, 6);
    }
  }
}

}  // namespace
}  // namespace tessera

namespace tessera {
namespace {

TEST_F(LocalBackendTest, DiscoverFindsMembersWhoseHandlesWereNeverRecorded) {
  LocalBackend backend(root_);
  const LaunchSpec s = spec({"sh", "-c", "sleep 0.4; exit 5"}, 2);
  const std::vector<MemberHandle> handles = launch(backend, s);
  // A server that crashed before storing `handles` finds the same members from disk.
  std::vector<MemberHandle> found;
  ASSERT_TRUE(eventually([&] {
    found = backend.discover(s.job, s.attempt, 2);
    return found.size() == 2;
  }));
  EXPECT_EQ(found, handles);
  const std::vector<MemberStatus> st = wait_done(backend, s, found);
  for (const MemberStatus& m : st) {
    EXPECT_EQ(m.phase, MemberPhase::kExited);
    EXPECT_EQ(m.exit_code, 5);
  }
  // After they ended, discover still finds them, and poll reports them from the exit files.
  found = backend.discover(s.job, s.attempt, 2);
  ASSERT_EQ(found.size(), 2u);
  for (const MemberStatus& m : backend.poll(s.job, s.attempt, found)) {
    EXPECT_EQ(m.phase, MemberPhase::kExited);
    EXPECT_EQ(m.exit_code, 5);
  }
  // An attempt that never started has no members.
  EXPECT_TRUE(backend.discover(s.job, s.attempt + 1, 2).empty());
}

}  // namespace
}  // namespace tessera

namespace tessera {
namespace {

// A member in a cgroup of its own: its memory request is its limit, its processes
// are counted, and the group goes when the member does. The fixture is LocalBackendTest's
// (its root, its spec, and its clean-up of the processes launched), with a cgroup parent of
// the test's own.
class CgroupBackendTest : public LocalBackendTest {
 protected:
  void SetUp() override {
    LocalBackendTest::SetUp();
    cgroups_ = Cgroups::detect("/sys/fs/cgroup", "tessera-test-" + std::to_string(::getpid()));
    if (!cgroups_.available()) GTEST_SKIP() << cgroups_.describe();
  }
  void TearDown() override {
    LocalBackendTest::TearDown();
    for (const std::string& d : cgroups_.dirs("x")) ::rmdir(fs::path(d).parent_path().c_str());
  }
  // One member asking for `mem_mib` of memory and two CPUs.
  LaunchSpec confined(std::vector<std::string> command, int64_t mem_mib, uint32_t attempt) {
    LaunchSpec s = spec(std::move(command));
    s.attempt = attempt;
    s.members[0].mem_mib = mem_mib;
    s.members[0].cpu_milli = 2000;
    return s;
  }
  Cgroups cgroups_;
};

TEST_F(CgroupBackendTest, AMemberIsConfinedToItsRequestAndItsGroupGoesWithIt) {
  LocalBackendOptions opt;
  opt.cgroups = cgroups_;
  opt.pids_per_member = 64;
  LocalBackend backend(root_, opt);
  // Its own group, with its limits, from its first instruction on.
  LaunchSpec s = confined({"sh", "-c", "cat /proc/self/cgroup; sleep 0.5"}, 64, 1);
  auto h = launch(backend, s);
  const std::string group = cgroups_.dirs("42-1-r0")[0];
  ASSERT_TRUE(fs::exists(group));
  EXPECT_EQ(wait_done(backend, s, h)[0].exit_code, 0);
  const std::string log = read_file(backend.log_path(42, 1, 0));
  EXPECT_NE(log.find("42-1-r0"), std::string::npos) << log;
  EXPECT_FALSE(fs::exists(group)) << "the group outlived its member";
  // 64 MiB asked for, 400 MiB taken: the kernel kills it (SIGKILL: 128 + 9).
  s = confined({"python3", "-c", "x = bytearray(400 * 1024 * 1024); print('allocated')"}, 64, 2);
  h = launch(backend, s);
  EXPECT_EQ(wait_done(backend, s, h)[0].exit_code, 137) << read_file(backend.log_path(42, 2, 0));
  // 64 processes at most: a loop that starts 200 cannot.
  s = confined(
      {"sh", "-c", "for i in $(seq 200); do sleep 2 & done 2>/dev/null; echo forked; wait"}, 64, 3);
  h = launch(backend, s);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const std::vector<std::string> dirs = cgroups_.dirs("42-3-r0");
  std::ifstream pids((dirs.size() > 1 ? dirs[1] : dirs[0]) + "/pids.current");
  int64_t current = 0;
  pids >> current;
  EXPECT_GT(current, 0);
  EXPECT_LE(current, 64);
  wait_done(backend, s, h);
}

// Whatever the member leaves behind (a setsid'd child, out of its process group) ends with it:
// the member is not over until its cgroup is empty.
TEST_F(CgroupBackendTest, ProcessesThatLeftTheGroupEndWithTheMember) {
  LocalBackendOptions opt;
  opt.cgroups = cgroups_;
  LocalBackend backend(root_, opt);
  LaunchSpec s = confined(
      {"sh", "-c", "setsid sleep 97 </dev/null >/dev/null 2>&1 & echo $! > escapee.pid; exit 0"}, 0,
      4);
  const auto h = launch(backend, s);
  int64_t escapee = 0;
  ASSERT_TRUE(eventually([&] {
    std::ifstream in(backend.attempt_dir(s.job, s.attempt) + "/escapee.pid");
    return static_cast<bool>(in >> escapee) && escapee > 1;
  }));
  const std::vector<MemberStatus> st = wait_done(backend, s, h);
  EXPECT_EQ(st[0].phase, MemberPhase::kExited);
  EXPECT_EQ(st[0].exit_code, 0);
  EXPECT_TRUE(eventually([&] { return process_gone(escapee); }, 5000ms))
      << "pid " << escapee << " outlived its member";
  EXPECT_FALSE(fs::exists(cgroups_.dirs("42-4-r0")[0])) << "the group outlived its member";
  // And on SIGKILL (a cancel), while the member still runs.
  s = confined({"sh", "-c",
                "setsid sleep 97 </dev/null >/dev/null 2>&1 & echo $! > e2.pid; "
                "sleep 60"},
               0, 5);
  const auto h2 = launch(backend, s);
  int64_t second = 0;
  ASSERT_TRUE(eventually([&] {
    std::ifstream in(backend.attempt_dir(s.job, s.attempt) + "/e2.pid");
    return static_cast<bool>(in >> second) && second > 1;
  }));
  backend.signal(s.job, s.attempt, h2, SIGKILL);
  wait_done(backend, s, h2);
  EXPECT_TRUE(eventually([&] { return process_gone(second); }, 5000ms));
}

// A job's environment reaches only what runs as its tenant: a library it names in LD_PRELOAD
// (which the API refuses, and which this bypasses) is loaded by no process that is root.
TEST_F(LocalBackendTest, AJobsEnvironmentNeverReachesAProcessRunningAsRoot) {
  if (::geteuid() != 0) GTEST_SKIP() << "switching uids needs root";
  const std::string lib = root_ + "-preload.so", src = root_ + "-preload.c";
  const std::string seen = "/tmp/tessera-preload-seen-" + std::to_string(::getpid());
  fs::remove(seen);
  {
    std::ofstream c(src);
    c << "#include <stdio.h>\n#include <unistd.h>\n"
         "__attribute__((constructor)) static void mark(void) {\n"
         "  FILE* f = fopen(\""
      << seen
      << "\", \"a\");\n"
         "  if (f) { fprintf(f, \"%d\\n\", (int)geteuid()); fclose(f); }\n}\n";
  }
  ASSERT_EQ(std::system(("cc -shared -fPIC -o " + lib + " " + src + " 2>&1").c_str()), 0);
  ::chmod(lib.c_str(), 0755);
  // Every uid may append to the file the library writes.
  std::ofstream(seen).close();
  ::chmod(seen.c_str(), 0666);
  LocalBackend backend(root_);
  LaunchSpec s = spec({"true"});
  s.run_as_uid = s.run_as_gid = 900012345;
  s.env = {{"LD_PRELOAD", lib}};
  const auto h = launch(backend, s);
  EXPECT_EQ(wait_done(backend, s, h)[0].exit_code, 0) << read_file(backend.log_path(42, 1, 0));
  std::ifstream in(seen);
  int uid = -1, loads = 0;
  while (in >> uid) {
    ++loads;
    EXPECT_NE(uid, 0) << "the tenant's library ran as root";
  }
  EXPECT_GE(loads, 1) << "the library never loaded: the test proves nothing";
  fs::remove(seen);
  fs::remove(lib);
  fs::remove(src);
}

}  // namespace
}  // namespace tessera
