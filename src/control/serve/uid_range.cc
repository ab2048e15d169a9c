#include "control/serve/uid_range.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <stdexcept>

namespace tessera {

namespace fs = std::filesystem;

int64_t derived_uid_base(const std::string& database_id) {
  // FNV-1a: stable across builds and platforms (std::hash is not).
  uint64_t h = 1469598103934665603ull;
  for (const char c : database_id) {
    h ^= static_cast<unsigned char>(c);
    h *= 1099511628211ull;
  }
  return 900000000 + static_cast<int64_t>(h % kUidSlots) * kUidsPerServer;
}

namespace {

std::string describe(const UidRange& r) {
  return "[" + std::to_string(r.first) + ", " + std::to_string(r.last) + "]";
}

UniqueFd open_locked(const std::string& path, int flags, int lock) {
  UniqueFd fd(::open(path.c_str(), flags | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!fd.valid()) return fd;
  if (::flock(fd.get(), lock) != 0) fd.reset();
  return fd;
}

}  // namespace

UidRangeClaim UidRangeClaim::claim(const std::string& dir, const std::string& database_id,
                                   UidRange range) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  ::chmod(dir.c_str(), 0700);
  if (ec) throw std::runtime_error("cannot create " + dir + ": " + ec.message());
  // One server at a time looks at the claims and adds its own.
  const UniqueFd all = open_locked(dir + "/.lock", O_RDWR | O_CREAT, LOCK_EX);
  if (!all.valid()) {
    throw std::runtime_error("cannot lock " + dir + "/.lock: " + std::strerror(errno));
  }
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.empty() || name.front() == '.' || name == database_id) continue;
    const UniqueFd other = open_locked(e.path().string(), O_RDONLY, LOCK_SH | LOCK_NB);
    if (other.valid()) {
      fs::remove(e.path(), ec);  // nobody holds it: that server has stopped
      continue;
    }
    std::ifstream in(e.path());
    UidRange theirs;
    if (!(in >> theirs.first >> theirs.last)) continue;
    if (range.overlaps(theirs)) {
      throw UidRangeTaken("the tenant uids of this server, " + describe(range) +
                          ", overlap those of another server running on this host (database " +
                          name + ", uids " + describe(theirs) + ", claimed in " +
                          e.path().string() +
                          "): its tenants could reach this one's jobs; give this server another "
                          "--tenant-uid-base (a range of " +
                          std::to_string(kUidsPerServer) + " uids)");
    }
  }
  UidRangeClaim c;
  c.path_ = dir + "/" + database_id;
  // The same database's own claim (a server that stopped) is replaced; a live one is the
  // second server on one database, which the database's own lock refuses first.
  c.fd_ = open_locked(c.path_, O_RDWR | O_CREAT, LOCK_EX | LOCK_NB);
  if (!c.fd_.valid()) {
    throw std::runtime_error("cannot claim " + c.path_ + ": " + std::strerror(errno));
  }
  const std::string text = std::to_string(range.first) + " " + std::to_string(range.last) + "\n";
  if (::ftruncate(c.fd_.get(), 0) != 0 ||
      ::pwrite(c.fd_.get(), text.data(), text.size(), 0) != static_cast<ssize_t>(text.size())) {
    throw std::runtime_error("cannot write " + c.path_ + ": " + std::strerror(errno));
  }
  return c;
}

UidRangeClaim::~UidRangeClaim() {
  if (!fd_.valid() || path_.empty()) return;
  std::error_code ec;
  fs::remove(path_, ec);
}

}  // namespace tessera
