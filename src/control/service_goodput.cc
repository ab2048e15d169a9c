// Goodput rounds in `tessera serve --policy goodput` (docs/goodput.md): adaptive jobs report how
// they train, and every round (ServiceOptions::goodput_round_seconds) the engine's goodput
// allocation chooses each one's GPUs; a running job given another count is stopped (SIGTERM, its
// checkpoint grace) and started again at that count, told the batch to train with.
//
// The round only plans adaptive jobs, on the GPUs no other job holds; the cycle still starts
// every job (so priorities, quotas, holds and limits apply to adaptive jobs as to any other),
// an adaptive one at the size its round gave it and not before a round has planned it.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "control/service.h"
#include "control/service_job.h"
#include "control/token.h"
#include "engine/goodput_placement.h"

namespace tessera {

namespace {

BatchLimits limits_of(const AdaptiveBatch& a) {
  BatchLimits l;
  l.init_batch = a.batch;
  l.max_batch = a.max_batch;
  l.min_local = a.min_per_gpu;
  l.max_local = a.max_per_gpu;
  // A job whose batch cannot grow trains at that batch on any number of GPUs.
  if (a.max_batch == a.batch) l.fixed_batch = a.batch;
  return l;
}

int gpus_per_member(const JobSpec& s) {
  return std::max(1, s.demand.gpus);
}

}  // namespace

void Service::set_api_url(std::string url) {
  std::lock_guard lock(mu_);
  opt_.api_url = std::move(url);
}

bool Service::adaptive_locked(const Job& j) const {
  return policy_.goodput && j.row.spec.adaptive.batch > 0;
}

GoodputModel& Service::goodput_model_locked(Job& j) const {
  if (!j.goodput) j.goodput.emplace(limits_of(j.row.spec.adaptive));
  return *j.goodput;
}

bool Service::goodput_round_due_locked(double t) const {
  if (!policy_.goodput) return false;
  if (last_goodput_round_ < 0 || t - last_goodput_round_ >= opt_.goodput_round_seconds) {
    return true;
  }
  // A new (or requeued, or preempted) adaptive job is planned at once, not a round later.
  for (const Job* j : pending_) {
    if (adaptive_locked(*j) && j->round_members < 0 && j->unrunnable.empty() && !j->row.held) {
      return true;
    }
  }
  return false;
}

void Service::goodput_round_locked(double t) {
  // The last round's restarts first: until they have exited, their GPUs are neither theirs nor
  // free.
  for (const auto& [id, jp] : active_) {
    if (!jp->resizing.empty()) return;
  }
  last_goodput_round_ = t;
  // The ledger as it would be with no adaptive job running: what the round plans on.
  ClusterState plan = state_;
  struct Candidate {
    Job* job;
    int32_t members;  // it runs with now (0: waiting)
  };
  std::vector<Candidate> cands;
  for (const auto& [id, jp] : active_) {
    Job& j = *jp;
    if (!adaptive_locked(j) || j.row.state != JobState::kRunning || j.alloc.empty() || j.stopping) {
      continue;
    }
    plan.release(j.alloc);
    cands.push_back(Candidate{&j, j.alloc.members()});
  }
  for (Job* j : pending_) {
    if (!adaptive_locked(*j) || !j->unrunnable.empty() || j->row.held || !j->alloc.empty() ||
        dependencies_locked(j->row).state != DependencyState::kMet) {
      continue;
    }
    cands.push_back(Candidate{j, 0});
  }
  if (cands.empty()) return;
  ++counters_.goodput_rounds;
  int gpus = 0, per_node = 1;
  for (GpuId g = 0; g < cluster_.num_gpus(); ++g) gpus += plan.gpu_free(g) == 1000 ? 1 : 0;
  for (const Node& n : cluster_.nodes()) per_node = std::max<int>(per_node, n.num_gpus);

  std::vector<GoodputDemand> demand(cands.size());
  for (size_t k = 0; k < cands.size(); ++k) {
    Job& j = *cands[k].job;
    const GoodputModel& m = goodput_model_locked(j);
    const int g = gpus_per_member(j.spec);
    const int min_gpus = j.spec.min_members * g;
    // Offered at most `exploration` times what it has reported from (and at least its minimum).
    const int explored = static_cast<int>(
        std::floor(opt_.goodput.exploration * std::max(g, m.max_profiled_replicas())));
    const int cap = std::min({j.spec.max_members * g, std::max(min_gpus, explored), gpus});
    GoodputDemand& d = demand[k];
    d.speedup = member_speedup_curve(m, std::max(0, cap), per_node, g, min_gpus);
    d.rigid = j.spec.min_members == j.spec.max_members;
    d.current = cands[k].members * g;
    const bool running = cands[k].members > 0;
    d.attained_gpu_seconds = j.attained + (running ? run_gpu_seconds(j.row, j.alloc, t) : 0.0);
    d.run_seconds = j.ran_seconds + (running ? std::max(0.0, t - j.row.started_at) : 0.0);
    d.remaining_gpu_seconds = m.remaining_gpu_seconds();
  }
  const std::vector<int> want = allocate_goodput(demand, gpus, opt_.goodput);

  // Where each would go: jobs that keep their size keep their GPUs; then shrinks, then the
  // larger first (less fragmentation), each at the size up to its count whose placement trains
  // fastest. A job that fits nowhere gets none this round.
  std::vector<int32_t> members(cands.size(), 0);
  std::vector<size_t> order(cands.size());
  std::iota(order.begin(), order.end(), size_t{0});
  const auto wanted = [&](size_t k) { return want[k] / gpus_per_member(cands[k].job->spec); };
  const auto kept = [&](size_t k) { return cands[k].members > 0 && wanted(k) == cands[k].members; };
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (kept(a) != kept(b)) return kept(a);
    const bool sa = wanted(a) < cands[a].members, sb = wanted(b) < cands[b].members;
    if (sa != sb) return sa;
    return wanted(a) > wanted(b);
  });
  Rng rng(policy_.seed ^ (counters_.goodput_rounds * 0x9e3779b97f4a7c15ULL));
  for (const size_t k : order) {
    Job& j = *cands[k].job;
    if (kept(k)) {
      plan.allocate(j.alloc);
      members[k] = cands[k].members;
      continue;
    }
    if (wanted(k) < j.spec.min_members) continue;
    const GoodputModel& m = goodput_model_locked(j);
    Allocation a;
    if (place_best_size(
            plan, j.spec, j.spec.min_members, wanted(k), *policy_.scorer, rng,
            [&](int nodes, int n) { return m.speedup(nodes, n); }, a)) {
      plan.allocate(a);
      members[k] = a.members();
    }
  }

  for (size_t k = 0; k < cands.size(); ++k) {
    Job& j = *cands[k].job;
    const int g = gpus_per_member(j.spec);
    j.round_members = members[k];
    if (members[k] > 0) {
      j.round_spec = j.spec;
      j.round_spec.min_members = j.round_spec.max_members = members[k];
    }
    if (cands[k].members == 0 || members[k] == cands[k].members) {
      dirty_ = true;
      continue;
    }
    // Running at another size from now: it checkpoints (its grace) and starts again.
    j.resizing = members[k] > 0 ? fmt::format("resized by the goodput round: {} -> {} GPUs",
                                              cands[k].members * g, members[k] * g)
                                : fmt::format(
                                      "suspended by the goodput round: its {} GPUs train other "
                                      "jobs faster now; it resumes when a round gives it GPUs",
                                      cands[k].members * g);
    ++counters_.resizes;
    ask_to_stop_locked(j, t);
  }
}

std::string Service::report_token_locked(int64_t id) const {
  return hmac_sha256_hex(report_secret_, "job-report:" + std::to_string(id));
}

void Service::add_goodput_env_locked(Job& j,
                                     std::vector<std::pair<std::string, std::string>>& env) {
  const GoodputModel& m = goodput_model_locked(j);
  const int gpus = j.alloc.members() * gpus_per_member(j.spec);
  const int nodes = std::max(1, nodes_of(j.alloc));
  const GoodputChoice c = m.best(nodes, gpus);
  // Before its first report the model knows no step time: it trains at the batch it was tuned
  // for until it has said how fast it is.
  const BatchSplit s =
      c.goodput > 0 ? c.split : fixed_split(m.limits(), m.limits().init_batch, gpus);
  std::vector<std::pair<std::string, std::string>> add = {
      {"TESSERA_GPUS", std::to_string(gpus)},
      {"TESSERA_NODES", std::to_string(nodes)},
      {"TESSERA_BATCH_SIZE", std::to_string(s.batch(gpus))},
      {"TESSERA_MICRO_BATCH", std::to_string(s.atomic_bsz)},
      {"TESSERA_ACCUM_STEPS", std::to_string(s.accum_steps)},
  };
  if (!opt_.api_url.empty()) {
    add.emplace_back("TESSERA_REPORT_URL",
                     opt_.api_url + "/v1/jobs/" + std::to_string(j.row.id) + "/report");
    add.emplace_back("TESSERA_REPORT_TOKEN", report_token_locked(j.row.id));
  }
  // What the scheduler says wins over the job's own env of the same names.
  std::erase_if(env, [&](const auto& e) {
    return std::any_of(add.begin(), add.end(), [&](const auto& a) { return a.first == e.first; });
  });
  env.insert(env.end(), add.begin(), add.end());
  std::sort(env.begin(), env.end());
}

std::optional<Caller> Service::authenticate_report(const std::string& token, int64_t id) const {
  std::lock_guard lock(mu_);
  if (report_secret_.empty() || token.empty()) return std::nullopt;
  const auto it = jobs_.find(id);
  if (it == jobs_.end()) return std::nullopt;
  // Compared by hash, as tenant tokens are: the comparison's time tells nothing.
  if (sha256_hex(token) != sha256_hex(report_token_locked(id))) return std::nullopt;
  return Caller{false, it->second->row.tenant};
}

JobReportView Service::report(const Caller& caller, int64_t id, const JobReport& r) {
  std::lock_guard lock(mu_);
  Job& j = visible_job_locked(caller, id);
  const std::string name = "job " + std::to_string(id);
  if (j.row.spec.adaptive.batch <= 0) {
    throw ServiceError(ServiceError::kInvalid, "adaptive",
                       name +
                           " is not adaptive (its spec has no adaptive: section), so no round "
                           "sizes it from reports");
  }
  if (!policy_.goodput) {
    throw ServiceError(ServiceError::kInvalid, "",
                       "this server runs policy " + policy_.name() +
                           ": reports size jobs only under --policy goodput");
  }
  if (j.row.state != JobState::kRunning || j.alloc.empty()) {
    throw ServiceError(
        ServiceError::kConflict, "",
        name + " is " + std::string(to_string(j.row.state)) + ": a job reports while it runs");
  }
  const int max_gpus = j.spec.max_members * gpus_per_member(j.spec);
  const auto bad = [](const char* field, const std::string& why) {
    throw ServiceError(ServiceError::kInvalid, field, why);
  };
  // Checked whole before anything is recorded: a report is taken or refused as one.
  if (r.step) {
    const StepReport& s = *r.step;
    if (s.replicas < 1 || s.replicas > max_gpus) {
      bad("step.gpus", fmt::format("expected 1 to {} (the most GPUs its gang may have), got {}",
                                   max_gpus, s.replicas));
    }
    if (s.nodes < 1 || s.nodes > s.replicas ||
        s.nodes > static_cast<int>(cluster_.nodes().size())) {
      bad("step.nodes", fmt::format("expected 1 to {} (its GPUs, and this cluster's nodes), got {}",
                                    std::min<int>(s.replicas, cluster_.nodes().size()), s.nodes));
    }
    if (s.atomic_bsz < 1 || s.atomic_bsz > j.row.spec.adaptive.max_per_gpu) {
      bad("step.per_gpu_batch", fmt::format("expected 1 to {} (adaptive.per_gpu.max), got {}",
                                            j.row.spec.adaptive.max_per_gpu, s.atomic_bsz));
    }
    if (!(s.step_time > 0) || !std::isfinite(s.step_time)) {
      bad("step.seconds", "expected a finite number of seconds above 0");
    }
    if (!(s.sync_time >= 0) || !(s.sync_time <= s.step_time)) {
      bad("step.sync_seconds", "expected 0 to step.seconds");
    }
  }
  if (r.gradient) {
    const GradientStats& g = *r.gradient;
    if (!(g.sqr >= 0) || !std::isfinite(g.sqr))
      bad("gradient.sqr", "expected a finite number >= 0");
    if (!(g.var >= 0) || !std::isfinite(g.var))
      bad("gradient.var", "expected a finite number >= 0");
  }
  if (r.progress) {
    const auto [done, total] = *r.progress;
    if (!(total > 0) || !std::isfinite(total))
      bad("progress.total", "expected a finite number > 0");
    if (!(done >= 0) || !std::isfinite(done)) bad("progress.done", "expected a finite number >= 0");
  }
  GoodputModel& m = goodput_model_locked(j);
  if (r.step) m.report(*r.step);
  if (r.gradient) m.report(*r.gradient);
  if (r.progress) m.report_progress(r.progress->first, r.progress->second);

  JobReportView v;
  v.job = id;
  v.gpus = j.alloc.members() * gpus_per_member(j.spec);
  v.nodes = std::max(1, nodes_of(j.alloc));
  v.round_gpus = j.round_members < 0 ? -1 : j.round_members * gpus_per_member(j.spec);
  v.profiled = m.profiled();
  const GoodputChoice c = m.best(v.nodes, v.gpus);
  v.batch = c.goodput > 0 ? c.split : fixed_split(m.limits(), m.limits().init_batch, v.gpus);
  v.global_batch = v.batch.batch(v.gpus);
  v.speedup = m.speedup(v.nodes, v.gpus);
  v.remaining_gpu_seconds = m.remaining_gpu_seconds();
  return v;
}

}  // namespace tessera
