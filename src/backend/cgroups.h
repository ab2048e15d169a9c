// A cgroup per job member: memory, process count and CPU weight, so that one tenant's job
// cannot take the host's memory, fork without end, or starve its neighbours' CPUs (as
// Slurm confines every job to a cgroup). cgroup v2 where the host has a unified
// hierarchy with these controllers, else the v1 controllers mounted one per directory (as on
// these build machines). Creating groups needs root, or a delegated subtree.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

namespace tessera {

struct CgroupLimits {
  int64_t memory_bytes = 0;  // 0: none
  int64_t pids = 0;          // 0: none
  int64_t cpu_milli = 0;     // the member's CPU request, as a weight; 0: the default weight
};

class Cgroups {
 public:
  enum class Version { kNone, kV1, kV2 };

  // What `root` (normally /sys/fs/cgroup) offers to this process, with groups made under
  // `parent` ("tessera"). kNone, with why(), when neither version can be written.
  static Cgroups detect(const std::string& root = "/sys/fs/cgroup",
                        const std::string& parent = "tessera");

  Version version() const { return version_; }
  bool available() const { return version_ != Version::kNone; }
  // "cgroup v1 (memory, pids, cpu)", or why none is used.
  const std::string& describe() const { return describe_; }

  // Makes `group` with its limits; throws std::runtime_error naming the file that failed.
  void create(const std::string& group, const CgroupLimits& limits) const;
  // Moves process `pid` into `group` (its later children stay there).
  void add(const std::string& group, pid_t pid) const;
  // Sends SIGKILL to every process in `group`, after stopping it from forking more (v2:
  // cgroup.kill, atomic; v1: pids.max 0, then each pid in cgroup.procs). Returns true once no
  // process is left in it (an absent group is empty); a process in uninterruptible sleep may
  // take a later call. Processes that left the member's process group (setsid, a daemon) are
  // still in its cgroup, so this ends them too.
  bool kill_all(const std::string& group) const;
  // Removes `group` once its processes are gone; false if it is still busy or absent.
  bool remove(const std::string& group) const;
  // The directories of `group` (one per controller on v1; one on v2).
  std::vector<std::string> dirs(const std::string& group) const;

 private:
  Version version_ = Version::kNone;
  std::string root_, parent_, describe_;
};

}  // namespace tessera
