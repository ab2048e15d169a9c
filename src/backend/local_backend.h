// The local backend: runs each member of a gang as a process on this host (`tessera serve`
// on a lab server). A member runs under /bin/sh, which records the command's exit status in
// a file when it ends, so that a server restarted after a crash can still learn how members
// that outlived it ended (they are no longer its children, so waitpid cannot tell it).
//
// Layout of a job attempt under the backend's root directory:
//   ROOT/jobs/<job>/<attempt>/            the members' working directory
//   ROOT/jobs/<job>/<attempt>/rank-<r>.log     stdout and stderr of member r
//   ROOT/jobs/<job>/<attempt>/rank-<r>.pid     its shell's pid (written when it starts), then
//                                              its command's (written as that starts)
//   ROOT/jobs/<job>/<attempt>/rank-<r>.exit    its exit status (written when it ends)
//
// Every member is the leader of its own process group, so a signal reaches everything it
// started, and it survives the server being killed (it is adopted back after a restart).
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "backend/backend.h"
#include "backend/cgroups.h"

namespace tessera {

struct LocalBackendOptions {
  // The database's identity, written into each job directory it creates; a launch into a
  // directory another owner made is refused (job ids restart with a new database, and a
  // reused directory would hand a new job's tenant the old job's logs). Empty: no check.
  std::string owner;
  // Server environment variables jobs see besides PATH, locale, TZ and TMPDIR.
  std::vector<std::string> pass_env;
  // A cgroup per member (Cgroups::detect), limiting its memory to its request, its processes
  // to `pids_per_member` and weighting its CPU by its request. Not available: no confinement.
  Cgroups cgroups;
  int64_t pids_per_member = 4096;
};

class LocalBackend final : public Backend {
 public:
  // `root` is created if missing. Throws std::runtime_error naming it when it cannot be.
  // It is kept as an absolute path: members run in their attempt directory, so a relative
  // root would make their exit file path point elsewhere.
  explicit LocalBackend(std::string root, LocalBackendOptions opt = {});

  // Starts every member of the attempt; environment of member r (after the allowlist of the
  // server's, and HOME, the attempt directory):
  //   RANK=r, LOCAL_RANK=r, WORLD_SIZE, MASTER_ADDR=127.0.0.1, MASTER_PORT,
  //   CUDA_VISIBLE_DEVICES (comma-separated gpu_indices; empty string when none),
  //   TESSERA_GPU_FRACTION (e.g. "0.5", only when gpu_milli < 1000),
  //   TESSERA_JOB_ID, TESSERA_JOB_NAME, TESSERA_TENANT, TESSERA_ATTEMPT, TESSERA_WORKDIR,
  // then spec.env (which may override none of the above: it is applied first).
  // All or nothing: if one member cannot start, the ones started are killed and
  // std::runtime_error says why. A command that does not exist still starts (the shell
  // reports it in the log and exits 127).
  std::vector<MemberHandle> launch(const LaunchSpec& spec) override;

  // The state of each member of an attempt, by looking at its process and exit file. Reaps
  // members that are this process's children. A member whose shell ended is still running
  // until every process it left in its cgroup (or, without cgroups, its process group) is
  // gone: those are killed then, so nothing of a job outlives it. Safe to call for handles of a
  // previous server process (after a restart): a pid that is alive but started at another time is
  // not the member, which has ended (its exit file, if any, gives the status; else kLost).
  std::vector<MemberStatus> poll(uint64_t job, uint32_t attempt,
                                 const std::vector<MemberHandle>& members) override;

  // Sends `sig` (SIGTERM to ask for a checkpoint and exit, SIGKILL to stop) to the process
  // group of every member. A group whose leader has ended may still hold processes it left
  // behind, so it is signalled too; only a pid now used by another process (started at
  // another time) is skipped, and a group that no longer exists is ignored. SIGKILL also
  // reaches every process in the members' cgroups, those that left the group (setsid) too.
  // A SIGTERM for a member this instance launched whose command has not started yet is held
  // and sent by the first poll that finds it started: sent earlier, only its shell would get it.
  void signal(uint64_t job, uint32_t attempt, const std::vector<MemberHandle>& members,
              int sig) override;

  // The members of an attempt found from their pid files (each member's shell writes
  // rank-<r>.pid as its first act), for a server that crashed after starting them but before
  // it recorded their handles. Members that ended carry start_ticks 0 (poll then reports
  // them from their exit files); ranks that never started are missing.
  std::vector<MemberHandle> discover(uint64_t job, uint32_t attempt, int32_t world) override;

  std::string attempt_dir(uint64_t job, uint32_t attempt) const;
  std::string log_path(uint64_t job, uint32_t attempt, int32_t rank) const;
  // The log at log_path, opened without following links (see LogFile).
  LogFile open_log(uint64_t job, uint32_t attempt, int32_t rank) const override;
  // "the disk under its logs (DIR) is full" when less than 64 KiB is free there.
  std::string output_problem(uint64_t job, uint32_t attempt) const override;
  const std::string& root() const { return root_; }

 private:
  // How a child of this process ended, once waitpid has reaped it: after that waitpid can no
  // longer tell, and the exit file may be missing (killed by a signal).
  struct Reaped {
    int64_t start_ticks = 0;
    int wait_status = 0;
  };

  // Makes `dir` and every directory between it and the root 0711, for a job of another uid.
  bool passable_to(const std::string& dir) const;
  MemberStatus poll_member(uint64_t job, uint32_t attempt, const MemberHandle& h);
  std::string exit_path(uint64_t job, uint32_t attempt, int32_t rank) const;
  std::string pid_path(uint64_t job, uint32_t attempt, int32_t rank) const;
  // The cgroup of one member of one attempt, named after the database too, so that two
  // servers on one host never share one.
  std::string cgroup_name(uint64_t job, uint32_t attempt, int32_t rank) const;
  // Kills what member `h` left behind; true once nothing is left.
  bool kill_leftovers(uint64_t job, uint32_t attempt, const MemberHandle& h) const;
  // Whether member `rank`'s command has started, so that a SIGTERM to its group reaches it.
  bool command_started(uint64_t job, uint32_t attempt, int32_t rank) const;

  std::string root_;
  LocalBackendOptions opt_;
  // Guards reaped_ and makes "waitpid, then record" atomic, so two threads polling the same
  // member cannot see one reap it and the other find neither a child nor a status.
  std::mutex mu_;
  std::map<int64_t, Reaped> reaped_;  // by pid
  // Members this instance launched whose command it has not yet seen start, and whether a
  // SIGTERM waits for it to (guarded by mu_). Members it did not launch (adopted after a
  // restart) may run an older server's shell, which never says, and are signalled at once.
  using MemberKey = std::tuple<uint64_t, uint32_t, int32_t>;  // job, attempt, rank
  std::map<MemberKey, bool> starting_;
};

}  // namespace tessera
