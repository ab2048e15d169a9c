// The tenant uids of one `tessera serve`, claimed on the host so that two servers never give
// the same uid to different tenants (one server's tenant could then signal, read and trace the
// other's jobs). Each running server holds a claim file, DIR/<database id>, with its range,
// locked (flock) for as long as it runs: a claim whose lock nobody holds is a server that has
// stopped, and is removed. A server whose range overlaps a live claim refuses to start.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

#include "backend/unique_fd.h"

namespace tessera {

struct UidRange {
  int64_t first = 0;
  int64_t last = 0;  // inclusive
  bool overlaps(const UidRange& o) const { return first <= o.last && o.first <= last; }
};

// Tenants one server may have uids for.
inline constexpr int64_t kUidsPerServer = 100000;

// The first tenant uid of a server whose operator named none: 900,000,000 plus one of
// kUidSlots slots of kUidsPerServer chosen by the database's id, so that servers on one host
// differ by default (a server whose slot is taken moves to the next free one).
inline constexpr int64_t kUidSlots = 10000;
int64_t derived_uid_base(const std::string& database_id);

// Thrown by UidRangeClaim::claim when a live server holds an overlapping range.
class UidRangeTaken : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class UidRangeClaim {
 public:
  UidRangeClaim() = default;
  // Claims `range` for database `database_id` in `dir` (created 0700 if missing). Throws
  // UidRangeTaken naming the other server's database and range when a live claim overlaps
  // it, std::runtime_error naming the file it cannot write.
  static UidRangeClaim claim(const std::string& dir, const std::string& database_id,
                             UidRange range);
  // Drops the claim (the file is removed; the lock goes with its descriptor).
  ~UidRangeClaim();
  UidRangeClaim(UidRangeClaim&&) noexcept = default;
  UidRangeClaim& operator=(UidRangeClaim&&) noexcept = default;

 private:
  std::string path_;
  UniqueFd fd_;
};

}  // namespace tessera
