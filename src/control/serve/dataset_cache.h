// The server's dataset cache (`tessera serve --dataset-dir`; docs/data.md): datasets jobs read,
// copied onto this host's fast storage by an operator's staging command before the jobs that
// read them start, and ahead of time for the jobs next in the queue (pre-staging).
//
// Layout: DIR/NAME holds a shared dataset, readable by every job (directories 0755, files
// a+r); DIR/.private/TENANT/NAME a tenant's private one ("TENANT/NAME"), readable by that
// tenant's jobs alone (root:the tenant's gid, 0750/0640). DIR is 0711: jobs pass through it to
// the datasets they are given but cannot list it. DIR/NAME/.tessera-dataset (JSON: name,
// size_gb, staged_at) marks a dataset complete, so a restarted server finds what is ready from
// the disk. A directory without the marker is a staging that did not finish: staged again
// when wanted (staging commands should be idempotent, as `rsync` is). DIR/.staging/NAME.log
// ('/' in NAME written '+') holds the staging command's output, the server's alone.
//
// The staging command runs under /bin/sh -c with the server's environment plus
// TESSERA_DATASET (the name), TESSERA_DATASET_DIR (where to put it) and TESSERA_DATASET_GB
// (its declared size, or empty), in its own process group.
//
// Names are checked (model/dataset_name.h) before anything touches the disk, and eviction
// removes only a resolved path inside DIR: a name never leads outside the cache.
//
// Invariant: the ready and staging datasets' sizes (declared while staging, measured on disk
// once ready) add up to at most the capacity, when one is set; room is made by deleting the
// least recently used ready datasets that no job holds.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace tessera {

class DatasetCache {
 public:
  struct Options {
    std::string dir;
    std::string stage_command;
    double capacity_gb = 0;  // 0: no bound
    // The group whose members may read a private dataset of `owner` (a tenant): its jobs'
    // gid, or -1 where jobs run as the server's uid (then only the server's uid reads it).
    std::function<int64_t(const std::string& owner)> group_of;
  };
  enum class State : uint8_t { kAbsent, kStaging, kReady, kFailed };
  struct Entry {
    std::string name;
    State state = State::kAbsent;
    double size_gb = 0;       // on disk once ready; the declared size while staging
    double declared_gb = -1;  // what jobs said (-1: not said)
    double last_used = 0;
    double stage_started = 0;
    double staged_at = 0;
    double stage_seconds = 0;  // how long its last staging took
    int holders = 0;           // jobs placed or running that read it
    bool speculative = false;  // being staged ahead of any job that holds it
    std::string error;         // why its last staging failed
    pid_t pid = 0;             // its staging process while staging
  };

  // Creates `dir` if missing and reads what is ready there. Throws std::runtime_error naming
  // the directory when it cannot.
  explicit DatasetCache(Options opt);
  ~DatasetCache();  // stops stagings in flight (SIGTERM to their groups)
  DatasetCache(const DatasetCache&) = delete;
  DatasetCache& operator=(const DatasetCache&) = delete;

  const Entry* find(const std::string& name) const;
  // Whether `name` is ready, checked on disk: a copy whose marker is gone (an operator cleaned
  // the cache) is absent again, to be staged anew.
  bool ready(const std::string& name);
  // Starts staging `name` unless it is ready or staging. Returns false, saying why, when it
  // cannot start now: no room (held datasets fill the cache) or the command could not start
  // (then its state is kFailed). A speculative staging (ahead of any job) evicts nothing.
  bool request(const std::string& name, double declared_gb, double now, bool speculative,
               std::string& why);
  // Reaps ended stagings; returns the names whose state changed.
  std::vector<std::string> poll(double now);
  // A job placed or running that reads `name` holds it (never evicted while held).
  void hold(const std::string& name, double now);
  void release(const std::string& name, double now);

  std::string dir_of(const std::string& name) const;
  std::string log_of(const std::string& name) const;
  std::vector<Entry> entries() const;
  size_t speculative_in_flight() const;
  double used_gb() const;
  double capacity_gb() const { return opt_.capacity_gb; }
  uint64_t stagings_done() const { return done_; }
  uint64_t stagings_failed() const { return failed_; }
  uint64_t evictions() const { return evictions_; }

 private:
  // Whether `path`, resolved, lies below the cache directory (and is not the directory).
  bool inside_cache(const std::string& path) const;
  // Opens a ready dataset to the jobs that may read it (see Layout).
  void open_to_readers(const std::string& name) const;
  void add_ready(const std::string& name, const std::string& dir);
  bool make_room(double need_gb, const std::string& for_name, bool evict, std::string& why);
  Options opt_;
  std::map<std::string, Entry> entries_;
  uint64_t done_ = 0, failed_ = 0, evictions_ = 0;
};

const char* to_string(DatasetCache::State s);

}  // namespace tessera
