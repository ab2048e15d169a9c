#include "control/kube/leader_elector.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <thread>

#include "backend/kube/object_path.h"
#include "control/kube/kube_objects.h"

namespace tessera::kube {

namespace {

double wall_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

LeaderElector::LeaderElector(Client& client, LeaseOptions opt, std::function<double()> clock)
    : client_(client), opt_(std::move(opt)), clock_(std::move(clock)) {}

double LeaderElector::now() const {
  if (clock_) return clock_();
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::string LeaderElector::holder() const {
  std::lock_guard lock(mu_);
  return observed_holder_;
}

bool LeaderElector::try_acquire_or_renew() {
  const std::string base = "/apis/coordination.k8s.io/v1/namespaces/" + opt_.ns + "/leases";
  const std::string path = base + "/" + opt_.name;
  const double t = now();
  const std::string stamp = format_micro_time(wall_now());
  const auto duration = static_cast<int64_t>(std::lround(opt_.duration));
  Response got = client_.get(path);
  if (got.status == 404) {
    nlohmann::json lease = {{"apiVersion", "coordination.k8s.io/v1"},
                            {"kind", "Lease"},
                            {"metadata", {{"name", opt_.name}, {"namespace", opt_.ns}}},
                            {"spec",
                             {{"holderIdentity", opt_.identity},
                              {"leaseDurationSeconds", duration},
                              {"acquireTime", stamp},
                              {"renewTime", stamp},
                              {"leaseTransitions", 0}}}};
    Response created = client_.post(base, lease);
    std::lock_guard lock(mu_);
    if (!created.ok()) return false;  // someone else created it first (409), or no answer
    lease_ = created.json();
    observed_holder_ = opt_.identity;
    observed_renew_ = stamp;
    observed_at_ = renewed_at_ = t;
    return true;
  }
  if (!got.ok()) return false;
  nlohmann::json lease = got.json();
  if (lease.is_discarded() || !lease.is_object()) return false;
  nlohmann::json& spec = lease["spec"];
  const std::string holder = spec.value("holderIdentity", "");
  const std::string renew = spec.value("renewTime", "");
  {
    std::lock_guard lock(mu_);
    if (holder != observed_holder_ || renew != observed_renew_) {
      observed_holder_ = holder;
      observed_renew_ = renew;
      observed_at_ = t;
    }
    // Someone else holds it and renewed within a lease duration of our observing it.
    const double their_duration = spec.value("leaseDurationSeconds", duration);
    if (!holder.empty() && holder != opt_.identity && observed_at_ + their_duration > t) {
      return false;
    }
  }
  if (holder != opt_.identity) {
    spec["acquireTime"] = stamp;
    spec["leaseTransitions"] = spec.value("leaseTransitions", 0) + (holder.empty() ? 0 : 1);
  }
  spec["holderIdentity"] = opt_.identity;
  spec["leaseDurationSeconds"] = duration;
  spec["renewTime"] = stamp;
  // The PUT carries the resourceVersion we read: a concurrent writer makes it fail with 409.
  Response put = client_.put(path, lease);
  std::lock_guard lock(mu_);
  if (!put.ok()) return false;
  lease_ = put.json();
  observed_holder_ = opt_.identity;
  observed_renew_ = stamp;
  observed_at_ = renewed_at_ = t;
  return true;
}

void LeaderElector::release() {
  nlohmann::json lease;
  {
    std::lock_guard lock(mu_);
    lease = lease_;
  }
  if (!lease.is_object() || !lease.contains("spec")) return;
  lease["spec"]["holderIdentity"] = "";
  lease["spec"]["leaseDurationSeconds"] = 1;
  client_.put("/apis/coordination.k8s.io/v1/namespaces/" + opt_.ns + "/leases/" + opt_.name, lease);
}

void LeaderElector::run(const std::atomic<bool>& stop) {
  while (!stop.load()) {
    const bool held = try_acquire_or_renew();
    const double t = now();
    double renewed;
    {
      std::lock_guard lock(mu_);
      renewed = renewed_at_;
    }
    if (held) {
      if (!leading_.exchange(true)) {
        ++acquisitions_;
        std::fprintf(stderr, "tessera kube: %s became the leader (lease %s/%s)\n",
                     opt_.identity.c_str(), opt_.ns.c_str(), opt_.name.c_str());
      }
    } else if (leading_.load() && t - renewed > opt_.renew_deadline) {
      leading_ = false;
      std::fprintf(stderr, "tessera kube: %s lost the lease %s/%s (no renewal for %.0f s)\n",
                   opt_.identity.c_str(), opt_.ns.c_str(), opt_.name.c_str(), t - renewed);
    }
    // Wait `retry`, waking early to stop.
    const double until = now() + opt_.retry;
    while (!stop.load() && now() < until)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (leading_.exchange(false)) release();
}

}  // namespace tessera::kube
