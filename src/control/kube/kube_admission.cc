// A suspended Job admitted whole (job_admission.cc has the model's side): the room the engine
// gave its pods is held, and the Job is unsuspended (a merge patch of spec.suspend, as Kueue
// admits one); its controller then makes the pods, which are scheduled into that room.
#include <cstdio>

#include "backend/kube/object_path.h"
#include "control/kube/kube_scheduler.h"

namespace tessera::kube {

void KubeScheduler::admit_job(Gang& g, const Start& s) {
  const PodGroupInfo* job = model_.admission_of(g);
  if (job == nullptr) return;
  const int32_t pods = job->min_member;
  model_.reserve(g, s.alloc, now());
  ++counters_.starts;
  std::fprintf(stderr, "tessera kube: admitted suspended Job %s (%d pods)\n", g.key.c_str(), pods);
  writer_.post_job_event(*job, "Admitted", "Admit",
                         "admitted whole: room for its " + std::to_string(pods) +
                             " pods held until they exist; unsuspended by Tessera");
  const std::string ns = g.ns, name = g.group;
  actions_->push([this, ns, name] {
    const nlohmann::json body = {{"spec", {{"suspend", false}}}};
    const Response res = client_->patch(object_path(kJobs, ns, name), body, PatchType::kMerge);
    // Gone (deleted meanwhile): its hold ends with it. Any other failure: the hold ends after
    // ModelOptions::admission_hold and the Job, still suspended, is offered again.
    if (!res.ok() && res.status != 404) ++api_errors_;
  });
}

}  // namespace tessera::kube
