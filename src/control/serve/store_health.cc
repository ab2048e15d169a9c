#include "control/serve/store_health.h"

#include <ctime>

namespace tessera {

bool StoreHealth::failed(const std::string& error, double t) {
  std::lock_guard lock(mu_);
  const bool first = failing_since_ < 0;
  if (first) failing_since_ = t;
  ++failures_in_run_;
  ++failures_total_;
  last_error_ = error;
  return first;
}

bool StoreHealth::succeeded() {
  std::lock_guard lock(mu_);
  const bool recovered = failing_since_ >= 0;
  failing_since_ = -1;
  failures_in_run_ = 0;
  return recovered;
}

bool StoreHealth::ok() const {
  std::lock_guard lock(mu_);
  return failing_since_ < 0;
}

std::optional<std::string> StoreHealth::problem() const {
  std::lock_guard lock(mu_);
  if (failing_since_ < 0) return std::nullopt;
  // UTC, to the second: what an operator compares with the disk's own alerts.
  const auto secs = static_cast<std::time_t>(failing_since_);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char since[32];
  std::strftime(since, sizeof(since), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return "database writes failing since " + std::string(since) + " (" +
         std::to_string(failures_in_run_) + " failed writes): " + last_error_;
}

int64_t StoreHealth::failures_total() const {
  std::lock_guard lock(mu_);
  return failures_total_;
}

}  // namespace tessera
