// serve --classify: a job that names no priority class gets the class (and, naming none, the
// checkpoint grace) of the kind the workload classifier predicts for it; the classifier learns
// from the jobs whose class their user set, as they end (docs/classifier.md).
#include <algorithm>

#include "control/serve/job.h"
#include "control/serve/service.h"

namespace tessera {

std::string Service::classify_locked(JobRequest& req, TenantId tenant) {
  if (!classifier_ || !req.priority_class.empty()) return "";
  const JobSpec spec = to_spec_locked(req, tenant, "submitted job");
  const WorkloadPrediction p =
      classifier_->predict(workload_features(spec, req.tenant, req.command));
  const KindDefaults d = defaults_for(p.kind);
  JobRequest classified = req;
  classified.priority_class = std::string(to_string(d.priority));
  if (classified.checkpoint_grace_seconds < 0) {
    classified.checkpoint_grace_seconds = d.checkpoint_grace_seconds;
  }
  try {
    to_spec_locked(classified, tenant, "submitted job");  // the queue may not allow the class
  } catch (const ServiceError&) {
    return "";  // its queue's default applies, as without a classifier
  }
  req = std::move(classified);
  return std::string(to_string(p.kind));
}

void Service::learn_kind_locked(const JobRow& r) {
  if (!classifier_ || !r.classified.empty() || r.spec.priority_class.empty()) return;
  // Only work that ran to its end teaches it: a tenant cannot steer the kind of everyone's
  // jobs of some shape with a stream of submitted-and-cancelled ones (and a cancelled or failed
  // run says little of how long such work takes).
  if (r.state != JobState::kSucceeded || r.started_at < 0 || r.finished_at < r.started_at) return;
  PriorityClass p{};
  if (!parse_priority_class(r.spec.priority_class, p)) return;
  const auto t = tenants_.find(r.tenant);
  if (!t) return;
  std::string unrunnable;  // a configuration it no longer fits does not matter here
  const JobSpec spec = to_spec_locked(r.spec, *t, "finished job", &unrunnable);
  classifier_->observe(workload_features(spec, r.tenant, r.spec.command), kind_of_class(p),
                       r.finished_at - r.started_at);
}

void Service::restore_classifier_locked() {
  if (!classifier_) return;
  // What ended before this start teaches it, in the order it ended.
  std::vector<const JobRow*> ended;
  for (const auto& [id, j] : jobs_) {
    if (is_terminal(j->row.state)) ended.push_back(&j->row);
  }
  std::stable_sort(ended.begin(), ended.end(), [](const JobRow* a, const JobRow* b) {
    return a->finished_at < b->finished_at;
  });
  for (const JobRow* r : ended) learn_kind_locked(*r);
}

}  // namespace tessera
