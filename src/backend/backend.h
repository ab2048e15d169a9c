// Where placements become work: the interface the control plane dispatches to. The local
// backend runs gang members as processes on this host; tests use an in-memory one; a
// Kubernetes backend would bind pods. Handles identify members across control-plane
// restarts, so that a restarted server can adopt what still runs.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "backend/log_file.h"

namespace tessera {

// One member to start.
struct MemberLaunch {
  int32_t rank = 0;
  std::vector<int32_t> gpu_indices;  // host GPU indices -> CUDA_VISIBLE_DEVICES ("" when none)
  int32_t gpu_milli = 1000;          // share of each GPU; < 1000 -> TESSERA_GPU_FRACTION
  int64_t mem_mib = 0;               // its memory request: the limit of its cgroup (0: none)
  int64_t cpu_milli = 0;             // its CPU request: its cgroup's CPU weight (0: default)
};

// One attempt of a gang: everything the backend needs to start its members.
struct LaunchSpec {
  uint64_t job = 0;
  uint32_t attempt = 0;  // 1 for the first run, +1 for every restart after preemption
  std::string name;
  std::string tenant;
  std::vector<std::string> command;                      // argv, non-empty
  std::vector<std::pair<std::string, std::string>> env;  // added to the server's environment
  std::vector<MemberLaunch> members;                     // WORLD_SIZE = members.size()
  int32_t master_port = 0;                               // MASTER_PORT for the gang
  // The uid and gid its processes run as (the tenant's own, for a server running as root);
  // -1: the server's.
  int64_t run_as_uid = -1;
  int64_t run_as_gid = -1;
  // The network namespace its members join (backend/job_network.h); -1: the server's.
  int netns_fd = -1;
};

// What identifies a started member process across server restarts: its pid and its start
// time (field 22 of /proc/PID/stat, clock ticks since boot), so that a recycled pid is never
// mistaken for the member.
struct MemberHandle {
  int32_t rank = 0;
  int64_t pid = 0;
  int64_t start_ticks = 0;
  bool operator==(const MemberHandle&) const = default;
};

enum class MemberPhase : uint8_t {
  kRunning,  // the process is alive
  kExited,   // it ended; exit_code holds the command's status (128 + signal if killed)
  kLost,     // it is gone and left no exit status (killed with SIGKILL, or lost in a crash)
};

struct MemberStatus {
  int32_t rank = 0;
  MemberPhase phase = MemberPhase::kRunning;
  int32_t exit_code = -1;  // kExited only
  // kExited: when it ended (Unix seconds), if known; -1 otherwise. A member that ended while
  // the server was down ended before the server learns of it.
  double ended_at = -1;
};

// Implementations are safe to call from several threads.
class Backend {
 public:
  virtual ~Backend() = default;
  // Starts every member of the attempt, all or nothing: throws std::runtime_error (having
  // stopped what it started) if one cannot start.
  virtual std::vector<MemberHandle> launch(const LaunchSpec& spec) = 0;
  // The state of each member of an attempt.
  virtual std::vector<MemberStatus> poll(uint64_t job, uint32_t attempt,
                                         const std::vector<MemberHandle>& members) = 0;
  // Sends `sig` (SIGTERM: checkpoint and exit; SIGKILL: stop now) to every member.
  virtual void signal(uint64_t job, uint32_t attempt, const std::vector<MemberHandle>& members,
                      int sig) = 0;
  // The members of an attempt that started though their handles were never recorded (a
  // crash between launch and record); ranks that never started are missing.
  virtual std::vector<MemberHandle> discover(uint64_t job, uint32_t attempt, int32_t world) = 0;
  // Member `rank`'s output so far, opened for reading (empty if it has none). Throws
  // LogFileError when what stands in its place is not a log the server will read.
  virtual LogFile open_log(uint64_t job, uint32_t attempt, int32_t rank) const = 0;
  // Why an attempt's output may be missing (its log's disk is full), or "": said with the
  // reason a job failed, since a job that cannot write its output often fails for it.
  virtual std::string output_problem(uint64_t /*job*/, uint32_t /*attempt*/) const { return ""; }
};

}  // namespace tessera
