// What one tenant may ask of a shared server: without limits a tenant
// queued 50,000 jobs, and a 100,000-member CPU gang was accepted and launched at once. Slurm
// has the same knobs per user and account (MaxSubmitJobs, MaxTasksPerJob, MaxJobs); Kubernetes
// bounds request rates per client (API priority and fairness).
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <unordered_map>
#include <vector>

#include "model/job.h"

namespace tessera {

struct TenantLimits {
  int64_t max_pending_jobs = 10000;     // waiting jobs per tenant; a submission beyond is 429
  int64_t max_pending_per_user = 0;     // waiting jobs of each user inside a tenant; 0 = none
  int32_t max_gang_members = 256;       // members of one job; more is refused (400)
  int64_t max_running_members = 512;    // processes of a tenant's running jobs; more wait
  double submissions_per_second = 100;  // per tenant, sustained (429 beyond); 0 = no limit
  double submission_burst = 1000;       // taken at once before the rate applies
};

// Waiting items in arrival order, with how many each tenant (and each user, by user id) has:
// the queue the cycle reads and the counts a limit checks, kept together so they cannot
// disagree. An item's tenant and user do not change while it is queued.
template <class Item>
class TenantQueue {
 public:
  TenantQueue(std::function<TenantId(const Item*)> tenant_of,
              std::function<uint32_t(const Item*)> user_of)
      : tenant_of_(std::move(tenant_of)), user_of_(std::move(user_of)) {}

  void push_back(Item* item) {
    items_.push_back(item);
    ++count_slot(tenant_of_(item));
    if (const uint32_t u = user_of_(item); u != kNoId) ++user_counts_[u];
  }
  void erase(Item* item) {
    erase_if([item](const Item* i) { return i == item; });
  }
  template <class Pred>
  void erase_if(Pred pred) {
    std::erase_if(items_, [&](Item* i) {
      if (!pred(i)) return false;
      --count_slot(tenant_of_(i));
      if (const uint32_t u = user_of_(i); u != kNoId && --user_counts_[u] == 0) {
        user_counts_.erase(u);
      }
      return true;
    });
  }
  int64_t count(TenantId t) const { return t < counts_.size() ? counts_[t] : 0; }
  int64_t count_user(uint32_t user) const {
    const auto it = user_counts_.find(user);
    return it == user_counts_.end() ? 0 : it->second;
  }
  size_t size() const { return items_.size(); }
  auto begin() const { return items_.begin(); }
  auto end() const { return items_.end(); }

 private:
  int64_t& count_slot(TenantId t) {
    if (t >= counts_.size()) counts_.resize(t + 1, 0);
    return counts_[t];
  }
  std::function<TenantId(const Item*)> tenant_of_;
  std::function<uint32_t(const Item*)> user_of_;
  std::vector<Item*> items_;
  std::vector<int64_t> counts_;  // by tenant; invariant: counts_[t] = items of tenant t
  std::unordered_map<uint32_t, int64_t> user_counts_;  // by user id: items of that user (> 0)
};

}  // namespace tessera
