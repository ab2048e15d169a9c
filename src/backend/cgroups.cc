#include "backend/cgroups.h"

#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <stdexcept>

namespace tessera {
namespace {

constexpr const char* kV1Controllers[] = {"memory", "pids", "cpu"};

bool write_file(const std::string& path, const std::string& value) {
  std::ofstream out(path);
  out << value;
  out.flush();
  return static_cast<bool>(out);
}

std::string read_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

bool is_dir(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// Creates `dir` (if missing) and reports whether this process may create groups there.
bool make_dir(const std::string& dir) {
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) return false;
  return ::access(dir.c_str(), W_OK) == 0;
}

}  // namespace

Cgroups Cgroups::detect(const std::string& root, const std::string& parent) {
  Cgroups c;
  c.root_ = root;
  c.parent_ = parent;
  // v2: a unified hierarchy at the root, offering the three controllers.
  const std::string controllers = read_line(root + "/cgroup.controllers");
  if (!controllers.empty()) {
    for (const char* want : {"memory", "pids", "cpu"}) {
      if (controllers.find(want) == std::string::npos) {
        c.describe_ = std::string("none: cgroup v2 without the ") + want + " controller";
        return c;
      }
    }
    if (!make_dir(root + "/" + parent) ||
        !write_file(root + "/cgroup.subtree_control", "+memory +pids +cpu") ||
        !write_file(root + "/" + parent + "/cgroup.subtree_control", "+memory +pids +cpu")) {
      c.describe_ = "none: cannot create groups under " + root + " (" + std::strerror(errno) +
                    "; needs root or a delegated subtree)";
      return c;
    }
    c.version_ = Version::kV2;
    c.describe_ = "cgroup v2 (memory, pids, cpu) under " + root + "/" + parent;
    return c;
  }
  // v1: one hierarchy per controller.
  for (const char* ctl : kV1Controllers) {
    const std::string dir = root + "/" + ctl;
    if (!is_dir(dir)) {
      c.describe_ = std::string("none: no cgroup v2 and no v1 ") + ctl + " controller at " + dir;
      return c;
    }
    if (!make_dir(dir + "/" + parent)) {
      c.describe_ =
          "none: cannot create groups under " + dir + " (" + std::strerror(errno) + "; needs root)";
      return c;
    }
  }
  c.version_ = Version::kV1;
  c.describe_ = "cgroup v1 (memory, pids, cpu) under " + root + "/{memory,pids,cpu}/" + parent;
  return c;
}

std::vector<std::string> Cgroups::dirs(const std::string& group) const {
  std::vector<std::string> out;
  if (version_ == Version::kV2) {
    out.push_back(root_ + "/" + parent_ + "/" + group);
  } else if (version_ == Version::kV1) {
    for (const char* ctl : kV1Controllers) {
      out.push_back(root_ + "/" + ctl + "/" + parent_ + "/" + group);
    }
  }
  return out;
}

void Cgroups::create(const std::string& group, const CgroupLimits& l) const {
  if (!available()) return;
  for (const std::string& d : dirs(group)) {
    if (::mkdir(d.c_str(), 0755) != 0 && errno != EEXIST) {
      throw std::runtime_error("cannot create cgroup " + d + ": " + std::strerror(errno));
    }
  }
  auto set = [](const std::string& file, const std::string& value) {
    if (!write_file(file, value)) {
      throw std::runtime_error("cannot write " + value + " to " + file + ": " +
                               std::strerror(errno));
    }
  };
  const std::vector<std::string> d = dirs(group);
  if (version_ == Version::kV2) {
    if (l.memory_bytes > 0) set(d[0] + "/memory.max", std::to_string(l.memory_bytes));
    if (l.pids > 0) set(d[0] + "/pids.max", std::to_string(l.pids));
    // cpu.weight 1..10000, 100 the default: a member asking for one CPU gets the default.
    if (l.cpu_milli > 0) {
      set(d[0] + "/cpu.weight", std::to_string(std::clamp<int64_t>(l.cpu_milli / 10, 1, 10000)));
    }
  } else {
    if (l.memory_bytes > 0) set(d[0] + "/memory.limit_in_bytes", std::to_string(l.memory_bytes));
    if (l.pids > 0) set(d[1] + "/pids.max", std::to_string(l.pids));
    // cpu.shares: 1024 per CPU, at least 2.
    if (l.cpu_milli > 0) {
      set(d[2] + "/cpu.shares", std::to_string(std::max<int64_t>(2, l.cpu_milli * 1024 / 1000)));
    }
  }
}

void Cgroups::add(const std::string& group, pid_t pid) const {
  for (const std::string& d : dirs(group)) {
    if (!write_file(d + "/cgroup.procs", std::to_string(pid))) {
      throw std::runtime_error("cannot move pid " + std::to_string(pid) + " into " + d + ": " +
                               std::strerror(errno));
    }
  }
}

bool Cgroups::kill_all(const std::string& group) const {
  if (!available()) return true;
  const std::vector<std::string> d = dirs(group);
  // The pids controller's directory lists every process of the group on v1; on v2 the one.
  const std::string procs_dir = version_ == Version::kV2 ? d[0] : d[1];
  auto pids = [&] {
    std::vector<pid_t> out;
    std::ifstream in(procs_dir + "/cgroup.procs");
    for (long pid = 0; in >> pid;) {
      if (pid > 1) out.push_back(static_cast<pid_t>(pid));
    }
    return out;
  };
  if (!is_dir(procs_dir)) return true;
  if (version_ == Version::kV2 && write_file(d[0] + "/cgroup.kill", "1")) return pids().empty();
  // No new process can join while we read and kill: a fork in the group fails once pids.max is
  // 0, so one pass over cgroup.procs reaches them all. A listed pid may end and be reused
  // before the signal, so each is pinned with a pidfd and checked to be in the group still.
  if (version_ == Version::kV1) write_file(d[1] + "/pids.max", "0");
  const std::string member_of = ":/" + parent_ + "/" + group;
  for (int pass = 0; pass < 3; ++pass) {
    const std::vector<pid_t> left = pids();
    if (left.empty()) return true;
    for (const pid_t pid : left) {
      const int fd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
      if (fd < 0) continue;  // gone already
      std::ifstream in("/proc/" + std::to_string(pid) + "/cgroup");
      bool ours = false;
      for (std::string line; !ours && std::getline(in, line);) {
        ours = line.size() >= member_of.size() &&
               line.compare(line.size() - member_of.size(), member_of.size(), member_of) == 0;
      }
      if (ours) ::syscall(SYS_pidfd_send_signal, fd, SIGKILL, nullptr, 0);
      ::close(fd);
    }
  }
  return pids().empty();
}

bool Cgroups::remove(const std::string& group) const {
  bool all = true;
  for (const std::string& d : dirs(group)) {
    if (::rmdir(d.c_str()) != 0 && errno != ENOENT) all = false;
  }
  return all;
}

}  // namespace tessera
