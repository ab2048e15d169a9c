// Leader election on a coordination.k8s.io/v1 Lease, as client-go's leaderelection: one
// replica holds the lease and renews it every `retry`; another takes it over only when the
// holder has not renewed for `duration` as measured by its own clock since it last saw the
// record change (so clock skew between replicas does not matter). A leader that cannot renew
// within `renew_deadline` stops leading at once, before anyone else may take over.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>

#include <nlohmann/json.hpp>

#include "backend/kube/kube_client.h"

namespace tessera::kube {

struct LeaseOptions {
  std::string ns = "kube-system";
  std::string name = "tessera-scheduler";
  std::string identity;                                  // unique per replica
  double duration = 15, renew_deadline = 10, retry = 2;  // seconds (client-go's defaults)
};

class LeaderElector {
 public:
  // `clock`: monotonic seconds (tests inject their own).
  LeaderElector(Client& client, LeaseOptions opt, std::function<double()> clock = {});
  // Tries to acquire, then renews, until `stop`; gives the lease up (empty holder) on the way
  // out if it holds it, so a successor need not wait out the lease. Blocks.
  void run(const std::atomic<bool>& stop);
  // One attempt (tests): true when this replica holds the lease afterwards.
  bool try_acquire_or_renew();
  bool leading() const { return leading_.load(); }
  uint64_t acquisitions() const { return acquisitions_.load(); }
  std::string holder() const;  // as last observed

 private:
  void release();
  double now() const;

  Client& client_;
  LeaseOptions opt_;
  std::function<double()> clock_;
  std::atomic<bool> leading_{false};
  std::atomic<uint64_t> acquisitions_{0};
  mutable std::mutex mu_;
  std::string observed_holder_, observed_renew_;  // the record as last seen
  double observed_at_ = -1e18;                    // our clock when it last changed
  double renewed_at_ = -1e18;                     // our clock at our last successful renewal
  nlohmann::json lease_;                          // last read or written
};

}  // namespace tessera::kube
