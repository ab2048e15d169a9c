#include "backend/member_spawn.h"

#include <fcntl.h>
#include <grp.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <climits>
#include <cstring>
#include <utility>

namespace tessera {

namespace {

// The steps the child takes, in order; a failure reports its index and errno.
constexpr std::array<const char*, 15> kSteps = {"move its pipes",
                                                "reset its signals",
                                                "become a process group",
                                                "wait at the gate",
                                                "enter the network namespace",
                                                "open /dev/null",
                                                "open its log",
                                                "redirect stderr",
                                                "open its pid file",
                                                "open its exit file",
                                                "enter its directory",
                                                "close the server's descriptors",
                                                "forbid new privileges",
                                                "drop to the tenant's uid",
                                                "exec"};

struct ChildError {
  int step;
  int err;
};

[[noreturn]] void child_fail(int err_fd, int step) {
  const ChildError e{step, errno};
  // Nothing to do if this fails: the parent then sees end of file and a child that exited 127.
  [[maybe_unused]] const ssize_t n = ::write(err_fd, &e, sizeof e);
  ::_exit(127);
}

// Puts `fd` at `target`, not close-on-exec.
bool place(int fd, int target) {
  if (fd < 0) return false;
  if (fd == target) return true;
  const bool ok = ::dup2(fd, target) == target;
  ::close(fd);
  return ok;
}

// The child between fork and exec: async-signal-safe calls only (the server has other
// threads, whose locks the child may have copied held), no allocation, raw syscalls for the
// uid drop (glibc's setresuid would try to reach threads the child does not have).
[[noreturn]] void run_child(const MemberExec& m, char* const* argv, char* const* envp, int gate_r,
                            int gate_w, int err_r, int err_w) {
  ::close(gate_w);
  ::close(err_r);
  int step = 0;
  const int gate = ::fcntl(gate_r, F_DUPFD_CLOEXEC, 100);
  const int err = ::fcntl(err_w, F_DUPFD_CLOEXEC, 100);
  if (gate < 0 || err < 0) child_fail(err_w, step);
  ::close(gate_r);
  ::close(err_w);

  ++step;  // signals: the server blocks and catches some; the member starts clean
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  for (int s = 1; s < NSIG; ++s) ::sigaction(s, &dfl, nullptr);  // SIGKILL etc. refuse: fine
  sigset_t none;
  sigemptyset(&none);
  if (::sigprocmask(SIG_SETMASK, &none, nullptr) != 0) child_fail(err, step);

  ++step;
  if (::setpgid(0, 0) != 0) child_fail(err, step);

  ++step;  // one byte: go on; end of file (the server gave up or died): never run unconfined
  char go = 0;
  ssize_t n = 0;
  while ((n = ::read(gate, &go, 1)) < 0 && errno == EINTR) {
  }
  if (n != 1) ::_exit(126);
  ::close(gate);

  ++step;
  if (m.netns_fd >= 0 && ::setns(m.netns_fd, CLONE_NEWNET) != 0) child_fail(err, step);

  ++step;
  if (!place(::open("/dev/null", O_RDONLY), STDIN_FILENO)) child_fail(err, step);
  ++step;
  if (!place(::open(m.log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600), STDOUT_FILENO)) {
    child_fail(err, step);
  }
  ++step;
  if (::dup2(STDOUT_FILENO, STDERR_FILENO) != STDERR_FILENO) child_fail(err, step);
  ++step;
  if (!place(::open(m.pid_file.c_str(), O_WRONLY | O_CREAT, 0600), 3)) child_fail(err, step);
  ++step;
  if (!place(::open(m.exit_file.c_str(), O_WRONLY | O_CREAT, 0600), 4)) child_fail(err, step);
  ++step;
  if (::chdir(m.dir.c_str()) != 0) child_fail(err, step);

  ++step;  // the server's descriptors (its database, its listening socket) stay the server's
  if ((err > 5 && ::close_range(5, static_cast<unsigned>(err - 1), 0) != 0) ||
      ::close_range(static_cast<unsigned>(err + 1), UINT_MAX, 0) != 0) {
    child_fail(err, step);
  }

  ++step;
  const bool drop = m.uid >= 0;
  // A tenant's job never gains privileges (no setuid program runs as its owner for it).
  if (drop && ::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) child_fail(err, step);
  ++step;
  if (drop) {
    const auto uid = static_cast<uid_t>(m.uid);
    const auto gid = static_cast<gid_t>(m.gid);
    if (::syscall(SYS_setgroups, 0, nullptr) != 0 || ::syscall(SYS_setresgid, gid, gid, gid) != 0 ||
        ::syscall(SYS_setresuid, uid, uid, uid) != 0) {
      child_fail(err, step);
    }
  }

  ++step;
  ::execve(m.program.c_str(), argv, envp);
  child_fail(err, step);
}

std::vector<char*> c_array(const std::vector<std::string>& strings) {
  std::vector<char*> out;
  out.reserve(strings.size() + 1);
  for (const std::string& s : strings) out.push_back(const_cast<char*>(s.c_str()));
  out.push_back(nullptr);
  return out;
}

}  // namespace

std::optional<GatedMember> fork_member(const MemberExec& m, std::string& why) {
  // Built before the fork: the child allocates nothing.
  const std::vector<char*> argv = c_array(m.argv);
  const std::vector<char*> envp = c_array(m.envp);
  int gate[2];
  int err[2];
  if (::pipe2(gate, O_CLOEXEC) != 0) {
    why = std::string("pipe: ") + std::strerror(errno);
    return std::nullopt;
  }
  if (::pipe2(err, O_CLOEXEC) != 0) {
    why = std::string("pipe: ") + std::strerror(errno);
    ::close(gate[0]);
    ::close(gate[1]);
    return std::nullopt;
  }
  const pid_t pid = ::fork();
  if (pid == 0) run_child(m, argv.data(), envp.data(), gate[0], gate[1], err[0], err[1]);
  const int fork_errno = errno;
  ::close(gate[0]);
  ::close(err[1]);
  if (pid < 0) {
    ::close(gate[1]);
    ::close(err[0]);
    why = std::string("fork: ") + std::strerror(fork_errno);
    return std::nullopt;
  }
  // Also here, so that the group exists before anyone signals it, whichever runs first.
  ::setpgid(pid, pid);
  return GatedMember(pid, gate[1], err[0]);
}

GatedMember::GatedMember(GatedMember&& o) noexcept
    : pid_(std::exchange(o.pid_, -1)),
      gate_w_(std::exchange(o.gate_w_, -1)),
      err_r_(std::exchange(o.err_r_, -1)) {}

GatedMember::~GatedMember() {
  if (pid_ > 0 && gate_w_ >= 0) abandon();
  if (gate_w_ >= 0) ::close(gate_w_);
  if (err_r_ >= 0) ::close(err_r_);
}

std::string GatedMember::release() {
  ssize_t n = 0;
  while ((n = ::write(gate_w_, "g", 1)) < 0 && errno == EINTR) {
  }
  ::close(gate_w_);
  gate_w_ = -1;
  ChildError e{-1, 0};
  size_t got = 0;
  while (got < sizeof e) {
    const ssize_t r = ::read(err_r_, reinterpret_cast<char*>(&e) + got, sizeof e - got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    got += static_cast<size_t>(r);
  }
  ::close(err_r_);
  err_r_ = -1;
  if (got == 0 && n == 1) return "";  // exec closed the pipe: the member runs
  int status = 0;
  while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
  pid_ = -1;
  if (got != sizeof e || e.step < 0 || static_cast<size_t>(e.step) >= kSteps.size()) {
    return "the member's process ended before it could start";
  }
  return std::string("could not ") + kSteps[static_cast<size_t>(e.step)] + ": " +
         std::strerror(e.err);
}

void GatedMember::abandon() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGKILL);
  if (gate_w_ >= 0) ::close(gate_w_);
  gate_w_ = -1;
  int status = 0;
  while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
  pid_ = -1;
}

}  // namespace tessera
