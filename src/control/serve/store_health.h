// Whether the database takes writes. A write can fail for reasons outside the server (a full
// disk, an I/O error on a dying device), and the server must outlive it: running jobs keep
// running, reads keep answering, writes are refused with 503 until a write succeeds again,
// and /healthz says why. This records the first failure of a run of failures and the latest
// error; it is shared by the API threads and the scheduler thread, so it locks itself.
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>

namespace tessera {

class StoreHealth {
 public:
  // A write failed at time `t` with `error`. Returns true if this starts a run of failures
  // (the moment to tell the operator).
  bool failed(const std::string& error, double t);
  // A write succeeded. Returns true if this ends a run of failures.
  bool succeeded();
  bool ok() const;
  // "database writes failing since T (N failures): ERROR", or nullopt when healthy.
  std::optional<std::string> problem() const;
  int64_t failures_total() const;

 private:
  mutable std::mutex mu_;
  double failing_since_ = -1;  // -1: the last write succeeded
  int64_t failures_in_run_ = 0;
  int64_t failures_total_ = 0;
  std::string last_error_;
};

}  // namespace tessera
