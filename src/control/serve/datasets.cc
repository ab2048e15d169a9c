// Datasets in `tessera serve` (docs/data.md, "In tessera serve"): a job that names a dataset
// starts once the server's dataset cache holds it. The cycle places the job as usual; a job
// placed whose dataset is not ready keeps its GPUs, waits (reason Staging) while the
// operator's staging command copies the dataset into the cache, and starts when it is there.
// While jobs wait in the queue, the datasets of those next in line are staged ahead, a few at
// a time and only into free room, so that they start at once when their turn comes.
#include <algorithm>

#include "control/serve/job.h"
#include "control/serve/service.h"
#include "model/dataset.h"

namespace tessera {

namespace {

// The dataset's size as the job declared it, else the built-in dataset's, else unknown (-1).
double declared_gb(const JobRequest& r) {
  if (r.dataset_gb > 0) return r.dataset_gb;
  if (const auto d = known_dataset(r.dataset)) return d->size_gb;
  return -1;
}

}  // namespace

bool Service::needs_staging_locked(const Job& j) const {
  if (datasets_ == nullptr || j.row.spec.dataset.empty()) return false;
  return !datasets_->ready(j.row.spec.dataset);
}

Service::DataState Service::stage_for_locked(Job& j, std::vector<const JobRow*>& dirty) {
  const std::string& name = j.row.spec.dataset;
  const double t = now();
  if (!j.data_held) {
    datasets_->hold(name, t);
    j.data_held = true;
  }
  const DatasetCache::Entry* e = datasets_->find(name);
  if (datasets_->ready(name)) {
    j.staging = false;
    j.stage_requested = false;
    j.staging_why.clear();
    return DataState::kReady;
  }
  if (e != nullptr && e->state == DatasetCache::State::kStaging) {
    j.stage_requested = true;  // its end decides this placement
    return DataState::kWaiting;
  }
  if (e != nullptr && e->state == DatasetCache::State::kFailed && j.stage_requested) {
    j.row.state = JobState::kFailed;
    j.row.finished_at = t;
    j.row.message = "staging dataset " + name + " failed: " + e->error;
    release_locked(j);  // its GPUs and its hold on the dataset (release_dataset_locked)
    dirty.push_back(&j.row);
    return DataState::kFailed;
  }
  std::string why;
  if (datasets_->request(name, declared_gb(j.row.spec), t, false, why)) {
    j.stage_requested = true;
    j.staging_why.clear();
    return DataState::kWaiting;
  }
  e = datasets_->find(name);
  if (e != nullptr && e->state == DatasetCache::State::kFailed) {  // the command did not start
    j.stage_requested = true;
    return stage_for_locked(j, dirty);
  }
  j.staging_why = why;  // no room yet: asked again at the next poll
  return DataState::kWaiting;
}

void Service::release_dataset_locked(Job& j) {
  if (j.data_held && datasets_ != nullptr) datasets_->release(j.row.spec.dataset, now());
  j.data_held = false;
  j.staging = false;
  j.stage_requested = false;
  j.staging_why.clear();
}

void Service::stage_ahead_locked(double t) {
  if (datasets_ == nullptr || opt_.prestage_datasets <= 0) return;
  if (datasets_->speculative_in_flight() >= static_cast<size_t>(opt_.prestage_datasets)) return;
  // The waiting jobs next in line: higher priority classes first, then by how long they wait.
  std::vector<const Job*> next;
  for (const Job* j : pending_) {
    if (j->row.spec.dataset.empty() || j->row.held || !j->unrunnable.empty()) continue;
    next.push_back(j);
  }
  std::stable_sort(next.begin(), next.end(), [](const Job* a, const Job* b) {
    if (a->spec.priority != b->spec.priority) return a->spec.priority > b->spec.priority;
    return a->queued_since < b->queued_since;
  });
  for (const Job* j : next) {
    if (datasets_->speculative_in_flight() >= static_cast<size_t>(opt_.prestage_datasets)) break;
    const DatasetCache::Entry* e = datasets_->find(j->row.spec.dataset);
    if (e != nullptr &&
        (e->state == DatasetCache::State::kReady || e->state == DatasetCache::State::kStaging)) {
      continue;
    }
    if (e != nullptr && e->state == DatasetCache::State::kFailed) continue;  // its job will say
    std::string why;
    datasets_->request(j->row.spec.dataset, declared_gb(j->row.spec), t, true, why);
  }
}

std::vector<DatasetCache::Entry> Service::datasets(double* capacity_gb, double* used_gb) const {
  std::lock_guard lock(mu_);
  if (capacity_gb != nullptr) *capacity_gb = datasets_ ? datasets_->capacity_gb() : 0;
  if (used_gb != nullptr) *used_gb = datasets_ ? datasets_->used_gb() : 0;
  if (datasets_ == nullptr) return {};
  return datasets_->entries();
}

}  // namespace tessera
