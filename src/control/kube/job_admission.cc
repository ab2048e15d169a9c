// Suspended Jobs admitted whole, as Kueue admits them (docs/kubernetes.md, "Suspended Jobs"):
// a batch/v1 Job created with spec.suspend, whose template names our scheduler and that is not
// labelled for Kueue, is a gang before any of its pods exists. The engine is offered its
// parallelism's pods from the template; when it starts the gang, the scheduler holds the room
// it was given (reserve) and unsuspends the Job. The hold ends once the Job's pods exist (they
// are then scheduled as usual: an Indexed Job's as one gang, into the room just freed), when
// the Job goes, or after ModelOptions::admission_hold, so that a Job whose pods never come
// holds nothing for long.
//
//   suspended Job seen --track--> gang.admits (offered) --reserve--> held --pods exist--> freed
//                                      ^                                  (or Job gone, or hold)
//                                      +--untrack (unsuspended by someone else, deleted)
#include "control/kube/cluster_model.h"

namespace tessera::kube {

void ClusterModel::track_admission(const PodGroupInfo& job) {
  const bool ours_to_admit = job.api == GroupApi::kJob && job.suspended && job.pod_template &&
                             !job.queue_managed && ours(*job.pod_template);
  if (!ours_to_admit) {
    untrack_admission(job);
    return;
  }
  const std::string key = job.gang_key();
  Gang& g = gangs_[key];
  if (g.key.empty()) {
    g.key = key;
    g.ns = job.ns;
    g.group = job.name;
    g.serial = next_serial_++;
  }
  g.admits = job.key();
  g.stale_ = true;
  dirty_ = true;
}

void ClusterModel::untrack_admission(const PodGroupInfo& job) {
  auto it = gangs_.find(job.gang_key());
  if (it == gangs_.end() || it->second.admits != job.key()) return;
  it->second.admits.clear();
  it->second.stale_ = true;
  dirty_ = true;
}

const PodGroupInfo* ClusterModel::admission_of(const Gang& g) const {
  if (g.admits.empty() || !g.pods.empty()) return nullptr;
  const auto it = groups_.find(g.admits);
  if (it == groups_.end() || !it->second.suspended || !it->second.pod_template) return nullptr;
  return &it->second;
}

void ClusterModel::reserve(Gang& g, const Allocation& a, double now) {
  if (!g.kept_.reserved.member_node.empty()) return;  // admitted already
  ledger_->allocate(a);
  g.kept_.reserved = a;
  g.kept_.reserved_for = g.admits;
  g.kept_.reserved_at = now;
  g.stale_ = true;
  dirty_ = true;
}

bool ClusterModel::hold_reservation(Gang& g, double now) {
  GangKept& k = g.kept_;
  if (k.reserved.member_node.empty()) return false;
  const auto it = groups_.find(k.reserved_for);
  const PodGroupInfo* job = it == groups_.end() ? nullptr : &it->second;
  const int32_t want = job != nullptr ? job->min_member : 0;
  const bool pods_here = job != nullptr && !job->suspended &&
                         (job->active >= want || static_cast<int32_t>(g.pods.size()) >= want);
  if (job != nullptr && !pods_here && now - k.reserved_at < opt_.admission_hold) return true;
  ledger_->release(k.reserved);
  k.reserved = Allocation{};
  k.reserved_for.clear();
  k.reserved_at = 0;
  dirty_ = true;
  return false;
}

void ClusterModel::drop_reservations() {
  for (auto& [key, g] : gangs_) {
    g.kept_.reserved = Allocation{};
    g.kept_.reserved_for.clear();
    g.kept_.reserved_at = 0;
  }
}

bool ClusterModel::empty_gang(const Gang& g) const {
  return g.pods.empty() && g.admits.empty() && g.kept_.waits_for.empty() &&
         g.kept_.reserved.member_node.empty();
}

}  // namespace tessera::kube
