// How one job member's process starts. The server forks; the child, still the server's uid,
// waits at a gate until the server has put it into its cgroup, then sets itself up (process
// group, descriptors, working directory, the job's network namespace), drops to the tenant's uid
// and execs the member's shell with the job's environment.
//
// Invariant: nothing a tenant controls (its environment, its command) reaches a process that
// runs before the uid drop. The child before the drop runs only this file's code, with no
// dynamic loading and no exec; the job's environment is passed to the one execve after it.
// (Until now a setuid helper, setpriv, ran as root with the job's environment, so a job's
// LD_PRELOAD ran the tenant's code as root.)
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

namespace tessera {

struct MemberExec {
  std::string program;  // absolute path, execve'd as is (no PATH search)
  std::vector<std::string> argv;
  std::vector<std::string> envp;
  std::string dir;        // working directory
  std::string log;        // stdout and stderr (appended, created 0600)
  std::string pid_file;   // descriptor 3, created 0600: the member's shell writes its pid
  std::string exit_file;  // descriptor 4, created 0600: the member's shell writes its status
  int64_t uid = -1;       // -1: the server's uid and gid, and no drop
  int64_t gid = -1;
  int netns_fd = -1;  // the network namespace it joins (job_network.h); -1: the server's
};

// A forked member waiting at its gate. Destroying one that was neither released nor
// abandoned abandons it: no member ever runs without being released.
class GatedMember {
 public:
  GatedMember(GatedMember&& o) noexcept;
  GatedMember& operator=(GatedMember&&) = delete;
  GatedMember(const GatedMember&) = delete;
  ~GatedMember();

  pid_t pid() const { return pid_; }
  // Opens the gate: the child sets itself up and execs. Returns "" once the exec succeeded;
  // otherwise the step that failed and its error (the child has then exited and been reaped).
  std::string release();
  // Kills the child at its gate and reaps it.
  void abandon();

 private:
  friend std::optional<GatedMember> fork_member(const MemberExec&, std::string&);
  GatedMember(pid_t pid, int gate_w, int err_r) : pid_(pid), gate_w_(gate_w), err_r_(err_r) {}
  pid_t pid_ = -1;
  int gate_w_ = -1;  // one byte written here opens the gate; closing it unwritten stops it
  int err_r_ = -1;   // end of file once the exec succeeded; else the failed step
};

// Forks the member; nullopt (with `why`) when the pipes or the fork fail. The member is its
// own process group leader from before the gate opens.
std::optional<GatedMember> fork_member(const MemberExec& m, std::string& why);

}  // namespace tessera
