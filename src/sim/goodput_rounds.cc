#include "sim/goodput_rounds.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace tessera {

namespace {

// Pollux's simulator never gives a job more than 64 GPUs.
constexpr int kMaxAdaptiveGpus = 64;

int replicas_in(const std::vector<int>& placement) {
  int n = 0;
  for (int k : placement) n += k;
  return n;
}

}  // namespace

AdaptiveTraining::AdaptiveTraining(const PolluxApplication& app, BatchLimits limits)
    : app_(app), limits_(limits) {}

const AdaptiveTraining::Table& AdaptiveTraining::table(const std::vector<int>& placement) {
  if (auto it = tables_.find(placement); it != tables_.end()) return it->second;
  const int n = replicas_in(placement);
  if (n < 1) throw std::invalid_argument("adaptive training: an empty placement");
  // Each split's iteration time does not change with the epoch; its gain does.
  std::vector<BatchSplit> splits = candidate_splits(limits_, n);
  if (splits.empty()) splits.push_back(fixed_split(limits_, limits_.init_batch, n));
  std::vector<double> iteration(splits.size());
  for (size_t i = 0; i < splits.size(); ++i) {
    BatchSplit& s = splits[i];
    // As Pollux's Job.update_local_bsz: the batch trained with never exceeds max_batch.
    s.atomic_bsz =
        std::max(1, std::min(s.atomic_bsz, app_.max_batch_size() / (n * (s.accum_steps + 1))));
    const PolluxStepTime t = app_.throughput(placement, s.atomic_bsz);
    iteration[i] = t.step_time + s.accum_steps * (t.step_time - t.sync_time);
  }
  Table t;
  const int epochs = app_.max_epochs();
  for (int e = 0; e < epochs; ++e) {
    size_t best = 0;
    double rate = -1;
    for (size_t i = 0; i < splits.size(); ++i) {
      const double r = app_.gain(static_cast<double>(splits[i].batch(n)), e) / iteration[i];
      if (r > rate) rate = r, best = i;
    }
    t.split.push_back(splits[best]);
    t.rate.push_back(rate);
  }
  t.tail.assign(static_cast<size_t>(epochs), 0.0);
  for (int e = epochs - 2; e >= 0; --e) {
    const auto k = static_cast<size_t>(e + 1);
    t.tail[static_cast<size_t>(e)] =
        t.tail[k] + (app_.progress_at_epoch(e + 2) - app_.progress_at_epoch(e + 1)) / t.rate[k];
  }
  return tables_.emplace(placement, std::move(t)).first->second;
}

double AdaptiveTraining::seconds_left(const std::vector<int>& placement,
                                      const TrainingProgress& at) {
  if (at.epoch >= app_.max_epochs()) return 0;
  const Table& t = table(placement);
  const auto e = static_cast<size_t>(at.epoch);
  const double here = std::max(0.0, app_.progress_at_epoch(at.epoch + 1) - at.progress);
  return here / t.rate[e] + t.tail[e];
}

void AdaptiveTraining::advance(const std::vector<int>& placement, TrainingProgress& at,
                               double seconds) {
  const Table& t = table(placement);
  while (seconds > 0 && at.epoch < app_.max_epochs()) {
    const auto e = static_cast<size_t>(at.epoch);
    const double end = app_.progress_at_epoch(at.epoch + 1);
    const double need = std::max(0.0, end - at.progress) / t.rate[e];
    if (need > seconds) {
      at.progress += t.rate[e] * seconds;
      return;
    }
    at.progress = end;
    ++at.epoch;
    seconds -= need;
  }
}

BatchSplit AdaptiveTraining::split(const std::vector<int>& placement, int epoch) {
  const Table& t = table(placement);
  return t.split[static_cast<size_t>(std::clamp(epoch, 0, app_.max_epochs() - 1))];
}

GoodputPlanner::GoodputPlanner(const PolluxProfiles& profiles, const Workload& w, const Cluster& c,
                               GoodputAllocationOptions o)
    : w_(w), c_(c), opt_(o), jobs_(w.jobs.size()) {
  if (!(opt_.exploration >= 1)) {
    throw std::invalid_argument("goodput: exploration must be >= 1 (times the GPUs reported from)");
  }
  std::map<std::pair<const PolluxApplication*, int>, AdaptiveTraining*> shared;
  int64_t cluster_gpus = 0;
  for (const Node& n : c.nodes()) cluster_gpus += n.num_gpus;
  for (JobId j = 0; j < w.jobs.size(); ++j) {
    const JobSpec& s = w.jobs[j];
    if (s.model == kNoId) continue;
    const PolluxApplication* app = profiles.find(w.models.name(s.model));
    if (app == nullptr) continue;
    BatchLimits l;
    l.init_batch = app->init_batch_size();
    l.max_batch = app->max_batch_size();
    l.min_local = app->min_local_bsz();
    l.max_local = app->max_local_bsz();
    // A batch beyond the largest the application was validated with cannot be adapted: the
    // job keeps it and its size. Pollux's experiments also pin ncf, whose trace batch (32,768)
    // is already its largest, to that batch on one GPU (simulator.py: target_batch_size,
    // max_replicas 1); so does Tessera, to compare on the same jobs.
    const bool fixed = s.batch_size > app->max_batch_size() || app->name() == "ncf";
    if (fixed) l.fixed_batch = s.batch_size > 0 ? s.batch_size : app->max_batch_size();
    AdaptiveTraining*& t = shared[{app, l.fixed_batch}];
    if (t == nullptr) {
      trainings_.push_back(std::make_unique<AdaptiveTraining>(*app, l));
      t = trainings_.back().get();
    }
    int limit = 0;
    if (fixed) {
      limit = static_cast<int>(s.gpu_milli_per_gang(s.max_members) / kMilliPerGpu);
    } else {
      limit = static_cast<int>(std::min<int64_t>(
          {kMaxAdaptiveGpus, app->max_batch_size() / std::max(1, app->min_local_bsz()),
           cluster_gpus}));
    }
    jobs_[j] = Adaptive{t, TrainingProgress{}, GoodputModel(l), std::max(1, limit)};
  }
}

std::vector<int> GoodputPlanner::replicas_of(const PlacementShape& shape) const {
  // Replicas are GPUs; nodes ascending (Pollux's canonical rotation of a sorted placement).
  const int per_member = std::max(1, shape.gpus_per_member);
  std::vector<int> out;
  for (auto it = shape.members_per_node.rbegin(); it != shape.members_per_node.rend(); ++it) {
    out.push_back(int{*it} * per_member);
  }
  return out;
}

double GoodputPlanner::type_factor(const PlacementShape& shape) const {
  return relative_to_v100(c_.gpu_types(), shape.slowest_type);
}

double GoodputPlanner::seconds_left(JobId j, const PlacementShape& shape) {
  Adaptive& a = *jobs_[j];
  return a.training->seconds_left(replicas_of(shape), a.at) / type_factor(shape);
}

void GoodputPlanner::send_report(Adaptive& a, const std::vector<int>& placement,
                                 const TrainingProgress& at) {
  if (at.epoch >= a.training->app().max_epochs()) return;
  const int n = replicas_in(placement);
  const BatchSplit s = a.training->split(placement, at.epoch);
  const PolluxStepTime t = a.training->app().throughput(placement, s.atomic_bsz);
  StepReport r;
  r.nodes = static_cast<int>(placement.size());
  r.replicas = n;
  r.atomic_bsz = s.atomic_bsz;
  r.step_time = t.step_time;
  r.sync_time = std::clamp(t.sync_time, 0.0, t.step_time);
  a.model.report(r);
  const PolluxApplication& app = a.training->app();
  const auto [sqr, var] = app.grad_stats(static_cast<double>(s.batch(n)), at.epoch);
  a.model.report(GradientStats{sqr, var});
  a.model.report_progress(at.progress, app.progress_at_epoch(app.max_epochs()));
}

void GoodputPlanner::trained(JobId j, const PlacementShape& shape, double seconds) {
  move_on(j, shape, seconds, /*commit=*/true);
}

void GoodputPlanner::report(JobId j, const PlacementShape& shape, double seconds) {
  move_on(j, shape, seconds, /*commit=*/false);
}

void GoodputPlanner::move_on(JobId j, const PlacementShape& shape, double seconds, bool commit) {
  Adaptive& a = *jobs_[j];
  if (!(seconds > 0)) return;
  const std::vector<int> p = replicas_of(shape);
  TrainingProgress at = a.at;
  a.training->advance(p, at, seconds * type_factor(shape));
  send_report(a, p, at);
  if (commit) a.at = at;
}

double GoodputPlanner::speedup(JobId j, int nodes, int replicas) const {
  if (!jobs_[j]) return replicas;
  return jobs_[j]->model.speedup(nodes, replicas);
}

int GoodputPlanner::max_gpus(JobId j) const {
  if (!jobs_[j]) {
    const JobSpec& s = w_.jobs[j];
    return static_cast<int>(s.gpu_milli_per_gang(s.max_members) / kMilliPerGpu);
  }
  const Adaptive& a = *jobs_[j];
  if (a.model.limits().fixed_batch > 0) return a.limit;
  const auto explored = static_cast<double>(a.model.max_profiled_replicas());
  return std::min(a.limit, std::max(1, static_cast<int>(opt_.exploration * explored)));
}

std::vector<int> GoodputPlanner::plan(std::span<const GoodputCandidate> jobs, int gpus,
                                      int gpus_per_node) {
  std::vector<GoodputDemand> demand(jobs.size());
  for (size_t k = 0; k < jobs.size(); ++k) {
    const JobId j = jobs[k].id;
    GoodputDemand& d = demand[k];
    d.current = jobs[k].current;
    d.attained_gpu_seconds = jobs[k].attained;
    d.run_seconds = jobs[k].ran;
    if (jobs_[j]) d.remaining_gpu_seconds = jobs_[j]->model.remaining_gpu_seconds();
    const int max = std::min(max_gpus(j), gpus);
    if (!jobs_[j]) {
      // A rigid gang: its size or nothing, worth its size.
      d.rigid = true;
      d.speedup.assign(static_cast<size_t>(std::max(0, max)) + 1, 0.0);
      if (max == max_gpus(j) && max > 0) d.speedup[static_cast<size_t>(max)] = max;
      continue;
    }
    const GoodputModel& m = jobs_[j]->model;
    d.speedup = m.speedup_curve(max, gpus_per_node);
    d.rigid = m.limits().fixed_batch > 0 && max > 1;
  }
  return allocate_goodput(demand, gpus, opt_);
}

}  // namespace tessera
