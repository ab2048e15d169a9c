#include "backend/local_backend.h"

#include "backend/member_spawn.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string_view>
#include <system_error>

namespace tessera {

namespace {

namespace fs = std::filesystem;

constexpr const char* kShell = "/bin/sh";

// The shell survives a SIGTERM sent to the group (`trap :`) long enough to record how the
// command ended. It starts the command through a second shell, a fresh exec and so with
// SIGTERM's default action, which writes its pid as the pid file's second line and execs the
// command: until that line exists a SIGTERM would reach only processes that trap it and be
// lost, so signal() holds it back till then (command_started). "$@" keeps the command's argv
// intact whatever characters it holds, and a command that cannot be found makes sh print its
// name and exit 127.
// The pid file, written first, lets a server that crashed between starting a member and
// recording its pid find it again (LocalBackend::discover).
// The pid and exit files are opened by the server and handed over as descriptors 3 and 4, which
// the command itself does not get: it cannot write or replace them, and with its own uid it
// cannot reach them by name either.
// The server has put the process into its cgroup, and dropped it to the tenant's uid, before
// this shell starts (member_spawn.h), so nothing the command starts escapes either.
constexpr const char* kWrapper =
    "trap : TERM; echo $$ >&3; /bin/sh -c 'echo $$ >&3; exec \"$@\" 3>&-' sh \"$@\" 4>&-; "
    "s=$?; echo $s >&4; exit $s";

// The part of the server's environment a job sees: an allowlist, not the whole of it. The
// server's may hold secrets (TESSERA_ADMIN_TOKEN, a cloud credential), and a job is a tenant's
// code. Locale and time zone pass, PATH passes (or a default), and the
// names the operator lists (--pass-env: CUDA_HOME, LD_LIBRARY_PATH, a proxy).
std::map<std::string, std::string> job_environment(const std::vector<std::string>& pass) {
  std::map<std::string, std::string> out;
  out["PATH"] = "/usr/local/bin:/usr/bin:/bin";
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string_view entry(*e);
    const size_t eq = entry.find('=');
    if (eq == std::string_view::npos || eq == 0) continue;
    const std::string name(entry.substr(0, eq));
    const bool allowed = name == "PATH" || name == "LANG" || name == "LANGUAGE" || name == "TZ" ||
                         name == "TMPDIR" || name.rfind("LC_", 0) == 0 ||
                         std::find(pass.begin(), pass.end(), name) != pass.end();
    if (allowed) out[name] = std::string(entry.substr(eq + 1));
  }
  return out;
}

// Written where a pid or exit status will go; not a number, so it reads as none yet.
constexpr const char* kPlaceholder = "not yet written by the member's shell\n";

// The whole content of a small file, or nullopt if it cannot be read or is larger than
// 4 KiB. Plain read(2): whatever sits at the path (a directory, a process that vanished
// under /proc) must give "nothing", not an exception from a stream buffer.
std::optional<std::string> read_small_file(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  std::array<char, 4096> buf{};
  size_t len = 0;
  ssize_t n = 0;
  while (len < buf.size() && (n = read(fd, buf.data() + len, buf.size() - len)) != 0) {
    if (n < 0) {
      if (errno == EINTR) continue;
      break;
    }
    len += static_cast<size_t>(n);
  }
  close(fd);
  if (n < 0 || len == buf.size()) return std::nullopt;
  return std::string(buf.data(), len);
}

struct ProcStat {
  char state = '?';
  int64_t start_ticks = 0;
};

// Reads the state (field 3) and start time (field 22) of /proc/PID/stat. Field 2 is
// "(comm)", and comm may hold spaces and parentheses, so fields are counted from the last ')'.
std::optional<ProcStat> read_proc_stat(int64_t pid) {
  if (pid <= 0) return std::nullopt;
  const std::optional<std::string> line = read_small_file("/proc/" + std::to_string(pid) + "/stat");
  if (!line) return std::nullopt;
  const size_t close_paren = line->rfind(')');
  if (close_paren == std::string::npos) return std::nullopt;
  std::istringstream rest(line->substr(close_paren + 1));
  ProcStat st;
  rest >> st.state;
  // Fields 4..21 lie between the state and the start time.
  std::string skip;
  for (int field = 4; field < 22; ++field) rest >> skip;
  rest >> st.start_ticks;
  if (!rest) return std::nullopt;
  return st;
}

// The integer on line `index` (from 0) of `text`, if that line holds exactly one.
std::optional<int32_t> int_on_line(std::string_view text, size_t index) {
  for (; index > 0; --index) {
    const size_t nl = text.find('\n');
    if (nl == std::string_view::npos) return std::nullopt;
    text.remove_prefix(nl + 1);
  }
  text = text.substr(0, text.find('\n'));
  const size_t begin = text.find_first_not_of(" \t\r");
  if (begin == std::string_view::npos) return std::nullopt;
  const size_t end = text.find_last_not_of(" \t\r") + 1;
  int32_t value = 0;
  const char* first = text.data() + begin;
  const char* last = text.data() + end;
  const auto [ptr, ec] = std::from_chars(first, last, value);
  if (ec != std::errc() || ptr != last) return std::nullopt;
  return value;
}

// The integer a member's shell wrote (its exit status or its pid), if the file exists and
// holds exactly one on its first line (written over the placeholder's start).
std::optional<int32_t> read_int_file(const std::string& path) {
  const std::optional<std::string> text = read_small_file(path);
  if (!text) return std::nullopt;
  return int_on_line(*text, 0);
}

// 500 -> "0.5", 250 -> "0.25", 1 -> "0.001".
std::string format_fraction(int32_t milli) {
  std::string digits = std::to_string(milli);
  digits.insert(0, 3 - digits.size(), '0');
  while (!digits.empty() && digits.back() == '0') digits.pop_back();
  return "0." + digits;
}

std::string join_indices(const std::vector<int32_t>& indices) {
  std::string out;
  for (size_t i = 0; i < indices.size(); ++i) {
    if (i > 0) out += ',';
    out += std::to_string(indices[i]);
  }
  return out;
}

// Stops members already started when a later one could not be: kill their groups and reap
// them, so that a failed launch leaves nothing behind.
void kill_and_reap(const std::vector<MemberHandle>& started) {
  for (const MemberHandle& h : started) kill(-static_cast<pid_t>(h.pid), SIGKILL);
  for (const MemberHandle& h : started) {
    int status = 0;
    while (waitpid(static_cast<pid_t>(h.pid), &status, 0) < 0 && errno == EINTR) {
    }
  }
}

}  // namespace

LocalBackend::LocalBackend(std::string root, LocalBackendOptions opt) : opt_(std::move(opt)) {
  if (root.empty()) throw std::runtime_error("local backend: empty root directory");
  std::error_code ec;
  fs::path path = fs::absolute(fs::path(root), ec);
  if (ec) {
    throw std::runtime_error("local backend: cannot resolve root " + root + ": " + ec.message());
  }
  path = path.lexically_normal();
  // "a/b/" normalizes to "a/b/"; drop the empty last component so joined paths stay clean.
  if (!path.has_filename() && path.has_parent_path() && path != path.root_path()) {
    path = path.parent_path();
  }
  fs::create_directories(path, ec);
  if (ec || !fs::is_directory(path)) {
    throw std::runtime_error("local backend: cannot create root " + path.string() + ": " +
                             (ec ? ec.message() : std::string("not a directory")));
  }
  root_ = path.string();
}

std::string LocalBackend::attempt_dir(uint64_t job, uint32_t attempt) const {
  return root_ + "/jobs/" + std::to_string(job) + "/" + std::to_string(attempt);
}

std::string LocalBackend::log_path(uint64_t job, uint32_t attempt, int32_t rank) const {
  return attempt_dir(job, attempt) + "/rank-" + std::to_string(rank) + ".log";
}

LogFile LocalBackend::open_log(uint64_t job, uint32_t attempt, int32_t rank) const {
  return LogFile::open_under(root_, {"jobs", std::to_string(job), std::to_string(attempt),
                                     "rank-" + std::to_string(rank) + ".log"});
}

std::string LocalBackend::output_problem(uint64_t job, uint32_t attempt) const {
  const std::string dir = attempt_dir(job, attempt);
  struct statvfs fs {};
  if (::statvfs(dir.c_str(), &fs) != 0) return "";
  const auto free_bytes = static_cast<uint64_t>(fs.f_bavail) * fs.f_frsize;
  if (free_bytes >= 64 * 1024) return "";
  return "the disk under its logs (" + dir + ") is full, so its output may be cut short";
}

std::string LocalBackend::exit_path(uint64_t job, uint32_t attempt, int32_t rank) const {
  return attempt_dir(job, attempt) + "/rank-" + std::to_string(rank) + ".exit";
}

bool LocalBackend::passable_to(const std::string& dir) const {
  // From the root down to `dir`: others may pass through (x), not list (no r), the server's
  // files inside staying 0600.
  for (fs::path p = dir; p.string().size() >= root_.size(); p = p.parent_path()) {
    if (::chmod(p.c_str(), 0711) != 0) return false;
    if (p.string() == root_) break;
  }
  return true;
}

std::vector<MemberHandle> LocalBackend::launch(const LaunchSpec& spec) {
  const std::string job =
      "job " + std::to_string(spec.job) + " attempt " + std::to_string(spec.attempt);
  if (spec.command.empty()) throw std::runtime_error("launch " + job + ": empty command");
  if (spec.members.empty()) throw std::runtime_error("launch " + job + ": no members");
  for (const MemberLaunch& m : spec.members) {
    if (m.gpu_milli <= 0 || m.gpu_milli > 1000) {
      throw std::runtime_error("launch " + job + ": rank " + std::to_string(m.rank) +
                               " has gpu_milli " + std::to_string(m.gpu_milli) +
                               " outside 1..1000");
    }
  }

  const std::string dir = attempt_dir(spec.job, spec.attempt);
  const std::string owner_file = root_ + "/jobs/" + std::to_string(spec.job) + "/owner";
  std::string found_owner = read_small_file(owner_file).value_or("");
  while (!found_owner.empty() && std::isspace(static_cast<unsigned char>(found_owner.back()))) {
    found_owner.pop_back();
  }
  if (!opt_.owner.empty() && !found_owner.empty() && found_owner != opt_.owner) {
    throw std::runtime_error(
        "launch " + job + ": its directory " + root_ + "/jobs/" + std::to_string(spec.job) +
        " belongs to the jobs of another database (id " + found_owner + ", this one is " +
        opt_.owner + "); move it away rather than mix its files with a new job's");
  }
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec)
    throw std::runtime_error("launch " + job + ": cannot create " + dir + ": " + ec.message());
  if (!opt_.owner.empty() && found_owner.empty()) std::ofstream(owner_file) << opt_.owner << "\n";
  // A job of its own uid works in a directory of its own, below the attempt directory that
  // holds its logs, pid and exit files: those are the server's (0600 in a directory the job
  // may only pass through), so the job can neither read another's nor replace its own.
  const bool own_uid = spec.run_as_uid >= 0;
  std::string work = dir;
  if (own_uid) {
    if (::geteuid() != 0) {
      throw std::runtime_error("launch " + job + ": cannot run as uid " +
                               std::to_string(spec.run_as_uid) + ": the server is not root");
    }
    work = dir + "/work";
    fs::create_directories(work, ec);
    if (ec ||
        ::chown(work.c_str(), static_cast<uid_t>(spec.run_as_uid),
                static_cast<gid_t>(spec.run_as_gid)) != 0 ||
        ::chmod(work.c_str(), 0700) != 0 || !passable_to(dir)) {
      throw std::runtime_error("launch " + job + ": cannot prepare " + work + " for uid " +
                               std::to_string(spec.run_as_uid) + ": " +
                               (ec ? ec.message() : std::string(std::strerror(errno))));
    }
  }

  // Later assignments replace earlier ones: what the job may see of the server's environment,
  // then the user's, then the variables the gang relies on, which the user must not be able
  // to change.
  std::map<std::string, std::string> base = job_environment(opt_.pass_env);
  base["HOME"] = work;
  for (const auto& [name, value] : spec.env) base[name] = value;
  base["WORLD_SIZE"] = std::to_string(spec.members.size());
  base["MASTER_ADDR"] = "127.0.0.1";
  base["MASTER_PORT"] = std::to_string(spec.master_port);
  base["TESSERA_JOB_ID"] = std::to_string(spec.job);
  base["TESSERA_JOB_NAME"] = spec.name;
  base["TESSERA_TENANT"] = spec.tenant;
  base["TESSERA_ATTEMPT"] = std::to_string(spec.attempt);
  base["TESSERA_WORKDIR"] = work;

  std::vector<MemberExec> prepared;
  prepared.reserve(spec.members.size());
  for (const MemberLaunch& m : spec.members) {
    std::map<std::string, std::string> env = base;
    env["RANK"] = std::to_string(m.rank);
    env["LOCAL_RANK"] = std::to_string(m.rank);
    env["CUDA_VISIBLE_DEVICES"] = join_indices(m.gpu_indices);
    // A fractional member must not inherit a fraction from the server's or user's environment.
    env.erase("TESSERA_GPU_FRACTION");
    if (m.gpu_milli < 1000) env["TESSERA_GPU_FRACTION"] = format_fraction(m.gpu_milli);
    MemberExec p;
    p.program = kShell;
    p.argv = {kShell, "-c", kWrapper, "sh"};
    p.argv.insert(p.argv.end(), spec.command.begin(), spec.command.end());
    p.envp.reserve(env.size());
    for (const auto& [name, value] : env) p.envp.push_back(name + "=" + value);
    p.dir = work;
    p.log = log_path(spec.job, spec.attempt, m.rank);
    p.pid_file = pid_path(spec.job, spec.attempt, m.rank);
    p.exit_file = exit_path(spec.job, spec.attempt, m.rank);
    p.uid = spec.run_as_uid;
    p.gid = spec.run_as_gid;
    prepared.push_back(std::move(p));
  }

  // An exit file left from an earlier run of the same attempt would be read as this run's, so
  // both files are replaced by a placeholder that reads as "no number yet". The placeholder
  // holds a block of the disk for the shell: its `echo > FILE` truncates, freeing the block,
  // and writes into it, so a member's pid and exit status are still recorded when the disk
  // has filled meanwhile (otherwise a job that ended while the server was down would be lost
  // and run again). Best effort: a disk already full leaves them missing, read the same way.
  for (const MemberLaunch& m : spec.members) {
    for (const std::string& path :
         {exit_path(spec.job, spec.attempt, m.rank), pid_path(spec.job, spec.attempt, m.rank)}) {
      fs::remove(path, ec);
      std::ofstream(path) << kPlaceholder;
    }
  }

  std::vector<MemberHandle> started;
  started.reserve(prepared.size());
  // Stops what started and removes the members' cgroups, then says why.
  auto fail = [&](const std::string& why) {
    kill_and_reap(started);
    for (const MemberLaunch& m : spec.members) {
      const std::string group = cgroup_name(spec.job, spec.attempt, m.rank);
      opt_.cgroups.kill_all(group);
      opt_.cgroups.remove(group);
    }
    throw std::runtime_error("launch " + job + ": " + why);
  };
  for (size_t k = 0; k < prepared.size(); ++k) {
    MemberExec& p = prepared[k];
    const MemberLaunch& m = spec.members[k];
    const std::string rank = "rank " + std::to_string(m.rank);
    const std::string group = cgroup_name(spec.job, spec.attempt, m.rank);
    try {
      opt_.cgroups.create(group,
                          CgroupLimits{m.mem_mib * 1024 * 1024, opt_.pids_per_member, m.cpu_milli});
    } catch (const std::exception& e) {
      fail(rank + ": " + e.what());
    }
    p.netns_fd = spec.netns_fd;
    std::string why;
    std::optional<GatedMember> child = fork_member(p, why);
    if (!child) fail("cannot start " + rank + ": " + why);
    // Our unreaped child cannot vanish from /proc, so this fails only on a broken /proc.
    const std::optional<ProcStat> st = read_proc_stat(child->pid());
    if (!st) {
      child->abandon();
      fail("cannot read /proc/" + std::to_string(child->pid()) + "/stat for " + rank);
    }
    try {
      opt_.cgroups.add(group, child->pid());
    } catch (const std::exception& ex) {
      child->abandon();
      fail(rank + ": " + ex.what());
    }
    why = child->release();
    if (!why.empty()) {
      fail("cannot start " + rank + " (" + p.program + " with log " + p.log + " in " + work +
           "): " + why);
    }
    started.push_back(MemberHandle{m.rank, child->pid(), st->start_ticks});
  }
  const std::lock_guard<std::mutex> lock(mu_);
  for (const MemberHandle& h : started)
    starting_[MemberKey{spec.job, spec.attempt, h.rank}] = false;
  return started;
}

std::string LocalBackend::cgroup_name(uint64_t job, uint32_t attempt, int32_t rank) const {
  const std::string member =
      std::to_string(job) + "-" + std::to_string(attempt) + "-r" + std::to_string(rank);
  // 48 bits of the database's random id tell servers apart.
  return opt_.owner.empty() ? member : opt_.owner.substr(0, 12) + "-" + member;
}

bool LocalBackend::kill_leftovers(uint64_t job, uint32_t attempt, const MemberHandle& h) const {
  if (opt_.cgroups.available()) {
    const std::string group = cgroup_name(job, attempt, h.rank);
    if (!opt_.cgroups.kill_all(group)) return false;
    opt_.cgroups.remove(group);
    return true;
  }
  // Without cgroups, its process group: while any process of it lives, no new process can get
  // its number, so a group found under the leader's pid is the member's (unless the pid now
  // names another process). What left the group (setsid) escapes: docs/service.md.
  if (h.pid <= 1 || h.pid > std::numeric_limits<pid_t>::max()) return true;
  const std::optional<ProcStat> st = read_proc_stat(h.pid);
  if (h.start_ticks == 0 || (st && st->start_ticks != h.start_ticks)) return true;
  ::kill(-static_cast<pid_t>(h.pid), SIGKILL);
  return true;
}

std::string LocalBackend::pid_path(uint64_t job, uint32_t attempt, int32_t rank) const {
  return attempt_dir(job, attempt) + "/rank-" + std::to_string(rank) + ".pid";
}

std::vector<MemberHandle> LocalBackend::discover(uint64_t job, uint32_t attempt, int32_t world) {
  std::vector<MemberHandle> out;
  for (int32_t r = 0; r < world; ++r) {
    const std::optional<int32_t> pid = read_int_file(pid_path(job, attempt, r));
    if (!pid || *pid <= 1) continue;
    if (read_int_file(exit_path(job, attempt, r))) {
      out.push_back(MemberHandle{r, *pid, 0});  // ended: poll reads its exit file
      continue;
    }
    const std::optional<ProcStat> st = read_proc_stat(*pid);
    if (st && st->state != 'Z') out.push_back(MemberHandle{r, *pid, st->start_ticks});
  }
  return out;
}

MemberStatus LocalBackend::poll_member(uint64_t job, uint32_t attempt, const MemberHandle& h) {
  // A member that is gone: its exit file is complete (the shell wrote it before exiting).
  auto ended = [&](std::optional<int> wait_status) {
    // Not over while anything it started lives on (a daemon, a setsid'd child).
    if (!kill_leftovers(job, attempt, h)) return MemberStatus{h.rank, MemberPhase::kRunning, -1};
    MemberStatus s{h.rank, MemberPhase::kLost, -1};
    const std::string exit_file = exit_path(job, attempt, h.rank);
    if (const std::optional<int32_t> code = read_int_file(exit_file)) {
      s.phase = MemberPhase::kExited;
      s.exit_code = *code;
      // The shell wrote the file as it ended: its time is the member's end.
      struct stat st {};
      if (::stat(exit_file.c_str(), &st) == 0) {
        s.ended_at =
            static_cast<double>(st.st_mtim.tv_sec) + static_cast<double>(st.st_mtim.tv_nsec) / 1e9;
      }
    } else if (wait_status && WIFEXITED(*wait_status)) {
      // The shell ended normally but could not write the file (disk full, say).
      s.phase = MemberPhase::kExited;
      s.exit_code = WEXITSTATUS(*wait_status);
    }
    return s;
  };
  // pid 0 or negative would make waitpid wait for other children: never the member.
  if (h.pid <= 0 || h.pid > std::numeric_limits<pid_t>::max()) return ended(std::nullopt);
  const auto pid = static_cast<pid_t>(h.pid);

  const std::lock_guard<std::mutex> lock(mu_);
  if (const auto it = reaped_.find(h.pid);
      it != reaped_.end() && it->second.start_ticks == h.start_ticks) {
    return ended(it->second.wait_status);
  }
  const std::optional<ProcStat> st = read_proc_stat(h.pid);
  // The pid now names another process: the member ended and its pid was recycled. Never
  // waitpid on it, which could reap an unrelated child of ours.
  if (st && st->start_ticks != h.start_ticks) return ended(std::nullopt);

  int status = 0;
  pid_t r = 0;
  do {
    r = waitpid(pid, &status, WNOHANG);
  } while (r < 0 && errno == EINTR);
  if (r == pid) {
    reaped_[h.pid] = Reaped{h.start_ticks, status};
    return ended(status);
  }
  if (r == 0) return MemberStatus{h.rank, MemberPhase::kRunning, -1};
  // Not our child (adopted after a restart): /proc alone says whether it lives. A zombie has
  // ended and waits for its new parent to reap it.
  if (st && st->state != 'Z' && st->state != 'X') {
    return MemberStatus{h.rank, MemberPhase::kRunning, -1};
  }
  return ended(std::nullopt);
}

std::vector<MemberStatus> LocalBackend::poll(uint64_t job, uint32_t attempt,
                                             const std::vector<MemberHandle>& members) {
  std::vector<MemberStatus> out;
  out.reserve(members.size());
  for (const MemberHandle& h : members) {
    out.push_back(poll_member(job, attempt, h));
    const std::lock_guard<std::mutex> lock(mu_);
    const auto it = starting_.find(MemberKey{job, attempt, h.rank});
    if (it == starting_.end()) continue;
    if (out.back().phase != MemberPhase::kRunning) {
      starting_.erase(it);
    } else if (it->second && command_started(job, attempt, h.rank)) {
      starting_.erase(it);
      // As signal() would: not a pid that now names another process.
      const std::optional<ProcStat> st = read_proc_stat(h.pid);
      if (!st || st->start_ticks == h.start_ticks) ::kill(-static_cast<pid_t>(h.pid), SIGTERM);
    }
  }
  return out;
}

bool LocalBackend::command_started(uint64_t job, uint32_t attempt, int32_t rank) const {
  const std::optional<std::string> text = read_small_file(pid_path(job, attempt, rank));
  // No file, or one the launch could not even fill with the placeholder (a full disk): the
  // shell cannot write there either, so nothing is worth waiting for.
  if (!text || text->empty()) return true;
  return int_on_line(*text, 1).has_value();
}

void LocalBackend::signal(uint64_t job, uint32_t attempt, const std::vector<MemberHandle>& members,
                          int sig) {
  std::string first_error;
  for (const MemberHandle& h : members) {
    if (sig == SIGKILL) {
      if (opt_.cgroups.available()) opt_.cgroups.kill_all(cgroup_name(job, attempt, h.rank));
      const std::lock_guard<std::mutex> lock(mu_);
      starting_.erase(MemberKey{job, attempt, h.rank});  // nothing is held for it any more
    }
    // kill(0, ...) and kill(-1, ...) would reach our own group or every process.
    if (h.pid <= 1 || h.pid > std::numeric_limits<pid_t>::max()) continue;
    // A pid is not reused while a process group carries its number, so if the pid names
    // another process, the member's group is empty and the pid is no longer ours to signal.
    const std::optional<ProcStat> st = read_proc_stat(h.pid);
    if (st && st->start_ticks != h.start_ticks) continue;
    if (sig == SIGTERM) {
      const std::lock_guard<std::mutex> lock(mu_);
      if (const auto it = starting_.find(MemberKey{job, attempt, h.rank}); it != starting_.end()) {
        if (!command_started(job, attempt, h.rank)) {
          it->second = true;  // poll sends it once the command has started
          continue;
        }
        starting_.erase(it);
      }
    }
    if (kill(-static_cast<pid_t>(h.pid), sig) == 0) continue;
    const int e = errno;
    if (e != ESRCH && first_error.empty()) {
      first_error = "signal " + std::to_string(sig) + " to process group " + std::to_string(h.pid) +
                    " (rank " + std::to_string(h.rank) + "): " + strerror(e);
    }
  }
  if (!first_error.empty()) throw std::runtime_error(first_error);
}

}  // namespace tessera
