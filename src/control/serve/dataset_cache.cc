#include "control/serve/dataset_cache.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "model/dataset_name.h"

extern char** environ;

namespace tessera {

namespace fs = std::filesystem;

namespace {

constexpr const char* kMarker = ".tessera-dataset";

// Bytes of the regular files under `dir` (links are not followed), in GB.
double size_on_disk_gb(const fs::path& dir) {
  uintmax_t bytes = 0;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(dir, fs::directory_options::skip_permission_denied, ec),
       end;
       !ec && it != end; it.increment(ec)) {
    std::error_code e2;
    if (it->is_regular_file(e2) && !it->is_symlink(e2)) bytes += it->file_size(e2);
  }
  return static_cast<double>(bytes) / 1e9;
}

}  // namespace

const char* to_string(DatasetCache::State s) {
  switch (s) {
    case DatasetCache::State::kAbsent:
      return "absent";
    case DatasetCache::State::kStaging:
      return "staging";
    case DatasetCache::State::kReady:
      return "ready";
    case DatasetCache::State::kFailed:
      return "failed";
  }
  return "absent";
}

DatasetCache::DatasetCache(Options opt) : opt_(std::move(opt)) {
  std::error_code ec;
  fs::create_directories(fs::path(opt_.dir) / ".staging", ec);
  if (ec) throw std::runtime_error("--dataset-dir " + opt_.dir + ": " + ec.message());
  // Jobs of other uids pass through to the datasets they are given; nobody but the server
  // lists the cache or reads the staging logs.
  ::chmod(opt_.dir.c_str(), 0711);
  ::chmod((fs::path(opt_.dir) / ".staging").c_str(), 0700);
  for (const fs::directory_entry& d : fs::directory_iterator(opt_.dir, ec)) {
    const std::string name = d.path().filename().string();
    if (!dataset_component_problem(name).empty() || !d.is_directory()) continue;
    add_ready(name, d.path().string());
  }
  // Private datasets: every directory below .private that holds a marker.
  const fs::path priv = fs::path(opt_.dir) / ".private";
  for (fs::recursive_directory_iterator it(priv, ec), end; !ec && it != end; it.increment(ec)) {
    if (!it->is_directory() || it->is_symlink()) continue;
    const std::string name = it->path().lexically_relative(priv).string();
    if (dataset_name_problem(name, /*allow_owner=*/true).empty() && !dataset_owner(name).empty()) {
      add_ready(name, it->path().string());
    }
  }
}

void DatasetCache::add_ready(const std::string& name, const std::string& dir) {
  std::ifstream in(fs::path(dir) / kMarker);
  if (!in) return;  // a staging that did not finish
  Entry e;
  e.name = name;
  e.state = State::kReady;
  try {
    const nlohmann::json m = nlohmann::json::parse(in);
    e.staged_at = m.value("staged_at", 0.0);
    e.declared_gb = m.value("declared_gb", -1.0);
  } catch (const nlohmann::json::exception&) {
    return;  // a damaged marker: staged again when wanted
  }
  e.size_gb = size_on_disk_gb(dir);
  e.last_used = e.staged_at;
  entries_.emplace(name, std::move(e));
}

void DatasetCache::open_to_readers(const std::string& name) const {
  const fs::path dir = dir_of(name);
  const std::string owner(dataset_owner(name));
  const int64_t gid = owner.empty() || !opt_.group_of ? -1 : opt_.group_of(owner);
  // Shared: everyone reads. Private: the owner's group reads, others nothing (without tenant
  // gids, only the server's uid, which its jobs run as).
  const mode_t dir_mode = owner.empty() ? 0755 : 0750;
  const mode_t file_bits = owner.empty() ? 0444 : 0440;
  auto open_one = [&](const fs::path& p, bool is_dir) {
    struct stat st {};
    if (::lstat(p.c_str(), &st) != 0 || S_ISLNK(st.st_mode)) return;
    if (gid >= 0) {
      [[maybe_unused]] const int rc =
          ::lchown(p.c_str(), static_cast<uid_t>(-1), static_cast<gid_t>(gid));
    }
    // No setuid or setgid file leaves the cache (a job runs with no new privileges anyway).
    const mode_t keep = st.st_mode & (is_dir ? 07777 : 01777) & (owner.empty() ? 07777 : 07770);
    ::chmod(p.c_str(), is_dir ? (keep | dir_mode) : (keep | file_bits));
  };
  open_one(dir, true);
  std::error_code ec;
  for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code e2;
    open_one(it->path(), it->is_directory(e2) && !it->is_symlink(e2));
  }
}

DatasetCache::~DatasetCache() {
  for (auto& [name, e] : entries_) {
    if (e.state == State::kStaging && e.pid > 0) {
      ::kill(-e.pid, SIGTERM);
      ::waitpid(e.pid, nullptr, 0);
    }
  }
}

const DatasetCache::Entry* DatasetCache::find(const std::string& name) const {
  const auto it = entries_.find(name);
  return it == entries_.end() ? nullptr : &it->second;
}

bool DatasetCache::ready(const std::string& name) {
  const auto it = entries_.find(name);
  if (it == entries_.end() || it->second.state != State::kReady) return false;
  std::error_code ec;
  if (fs::exists(fs::path(dir_of(name)) / kMarker, ec)) return true;
  it->second.state = State::kAbsent;
  it->second.size_gb = 0;
  return false;
}

std::string DatasetCache::dir_of(const std::string& name) const {
  if (dataset_owner(name).empty()) return (fs::path(opt_.dir) / name).string();
  return (fs::path(opt_.dir) / ".private" / name).string();
}

std::string DatasetCache::log_of(const std::string& name) const {
  std::string file = name;
  std::replace(file.begin(), file.end(), '/', '+');  // '+' is in no name
  return (fs::path(opt_.dir) / ".staging" / (file + ".log")).string();
}

double DatasetCache::used_gb() const {
  double used = 0;
  for (const auto& [name, e] : entries_) {
    if (e.state == State::kReady || e.state == State::kStaging) used += e.size_gb;
  }
  return used;
}

size_t DatasetCache::speculative_in_flight() const {
  return static_cast<size_t>(std::count_if(entries_.begin(), entries_.end(), [](const auto& kv) {
    return kv.second.state == State::kStaging && kv.second.speculative;
  }));
}

std::vector<DatasetCache::Entry> DatasetCache::entries() const {
  std::vector<Entry> out;
  for (const auto& [name, e] : entries_) out.push_back(e);
  return out;
}

bool DatasetCache::make_room(double need_gb, const std::string& for_name, bool evict,
                             std::string& why) {
  if (opt_.capacity_gb <= 0) return true;
  for (;;) {
    const double free = opt_.capacity_gb - used_gb();
    if (need_gb <= free) return true;
    if (!evict) {
      why = fmt::format("the dataset cache has {:.1f} GB free ({:.1f} GB needed)",
                        std::max(0.0, free), need_gb);
      return false;
    }
    // The least recently used ready dataset no job holds.
    Entry* victim = nullptr;
    for (auto& [name, e] : entries_) {
      if (e.state != State::kReady || e.holders > 0 || name == for_name) continue;
      if (victim == nullptr || e.last_used < victim->last_used) victim = &e;
    }
    if (victim == nullptr) {
      why = fmt::format(
          "the dataset cache has {:.1f} of {:.1f} GB free and what fills it is in use ({:.1f} GB "
          "needed)",
          std::max(0.0, free), opt_.capacity_gb, need_gb);
      return false;
    }
    std::error_code ec;
    if (!inside_cache(dir_of(victim->name))) {
      why = "dataset " + victim->name + " is not a directory inside the cache " + opt_.dir +
            "; it is left alone";
      victim->state = State::kFailed;
      victim->error = why;
      return false;
    }
    fs::remove_all(dir_of(victim->name), ec);
    ++evictions_;
    victim->state = State::kAbsent;
    victim->size_gb = 0;
  }
}

bool DatasetCache::inside_cache(const std::string& path) const {
  // Resolved, so that neither a ".." nor a link swapped in by a job leads out of the cache.
  std::error_code ec;
  const fs::path root = fs::canonical(opt_.dir, ec);
  if (ec) return false;
  const fs::path p = fs::weakly_canonical(path, ec);
  if (ec || p == root) return false;
  const fs::path rel = p.lexically_relative(root);
  return !rel.empty() && *rel.begin() != "..";
}

bool DatasetCache::request(const std::string& name, double declared_gb, double now,
                           bool speculative, std::string& why) {
  if (const std::string bad = dataset_name_problem(name, /*allow_owner=*/true); !bad.empty()) {
    why = "not a dataset name: " + bad;
    return false;
  }
  Entry& e = entries_[name];
  e.name = name;
  if (e.state == State::kReady || e.state == State::kStaging) {
    if (!speculative) e.speculative = false;
    return true;
  }
  if (declared_gb > 0) e.declared_gb = declared_gb;
  const double need = std::max(0.0, e.declared_gb);
  // Staging ahead of any job uses free room only: it never evicts what a job may want.
  if (!make_room(need, name, !speculative, why)) return false;
  const std::string dir = dir_of(name);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) {
    why = "cannot create " + dir + ": " + ec.message();
    return false;
  }
  // The directories between the cache and a private dataset: passable, not listable.
  for (fs::path p = fs::path(dir).parent_path(); p.string().size() > opt_.dir.size();
       p = p.parent_path()) {
    ::chmod(p.c_str(), 0711);
  }
  // The server's environment, with the dataset's variables set last (they win).
  std::vector<std::string> env;
  for (char** p = environ; p != nullptr && *p != nullptr; ++p) {
    const std::string kv = *p;
    if (kv.rfind("TESSERA_DATASET", 0) != 0) env.push_back(kv);
  }
  env.push_back("TESSERA_DATASET=" + name);
  env.push_back("TESSERA_DATASET_DIR=" + dir);
  env.push_back("TESSERA_DATASET_GB=" +
                (e.declared_gb > 0 ? fmt::format("{:g}", e.declared_gb) : std::string()));
  std::vector<char*> envp;
  for (std::string& s : env) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::string sh = "/bin/sh", dash_c = "-c", cmd = opt_.stage_command;
  char* argv[] = {sh.data(), dash_c.data(), cmd.data(), nullptr};
  posix_spawn_file_actions_t fa;
  posix_spawnattr_t attr;
  posix_spawn_file_actions_init(&fa);
  posix_spawnattr_init(&attr);
  const std::string log = log_of(name);
  posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, log.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0640);
  posix_spawn_file_actions_adddup2(&fa, STDOUT_FILENO, STDERR_FILENO);
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, "/bin/sh", &fa, &attr, argv, envp.data());
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) {
    why = std::string("cannot start the staging command: ") + std::strerror(rc);
    e.state = State::kFailed;
    e.error = why;
    return false;
  }
  e.state = State::kStaging;
  e.pid = pid;
  e.size_gb = need;
  e.stage_started = now;
  e.speculative = speculative && e.holders == 0;
  e.error.clear();
  return true;
}

std::vector<std::string> DatasetCache::poll(double now) {
  std::vector<std::string> changed;
  for (auto& [name, e] : entries_) {
    if (e.state != State::kStaging || e.pid <= 0) continue;
    int status = 0;
    const pid_t r = ::waitpid(e.pid, &status, WNOHANG);
    if (r == 0) continue;  // still staging
    e.pid = 0;
    e.stage_seconds = now - e.stage_started;
    changed.push_back(name);
    const bool ok = r > 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0;
    if (!ok) {
      ++failed_;
      e.state = State::kFailed;
      e.size_gb = 0;
      e.error = r < 0 ? "lost the staging process"
                : WIFEXITED(status)
                    ? fmt::format("the staging command exited with {} (see {})",
                                  WEXITSTATUS(status), log_of(name))
                    : fmt::format("the staging command was killed by signal {} (see {})",
                                  WTERMSIG(status), log_of(name));
      continue;
    }
    ++done_;
    e.state = State::kReady;
    e.staged_at = now;
    e.last_used = now;
    e.size_gb = size_on_disk_gb(dir_of(name));
    std::ofstream(fs::path(dir_of(name)) / kMarker)
        << nlohmann::json{{"name", name}, {"staged_at", now}, {"declared_gb", e.declared_gb}}.dump()
        << '\n';
    open_to_readers(name);
  }
  return changed;
}

void DatasetCache::hold(const std::string& name, double now) {
  Entry& e = entries_[name];
  e.name = name;
  ++e.holders;
  e.speculative = false;
  e.last_used = now;
}

void DatasetCache::release(const std::string& name, double now) {
  const auto it = entries_.find(name);
  if (it == entries_.end()) return;
  it->second.holders = std::max(0, it->second.holders - 1);
  it->second.last_used = now;
}

}  // namespace tessera
