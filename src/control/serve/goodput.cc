// Goodput rounds in `tessera serve --policy goodput` (docs/goodput.md): adaptive jobs report how
// they train, and every round (ServiceOptions::goodput_round_seconds) the engine's goodput
// allocation chooses each one's GPUs; a running job given another count is stopped (SIGTERM, its
// checkpoint grace) and started again at that count, told the batch to train with.
//
// The round only plans adaptive jobs, on the GPUs no other job holds; the cycle still starts
// every job (so priorities, quotas, holds and limits apply to adaptive jobs as to any other),
// an adaptive one at the size its round gave it and not before a round has planned it.
#include <algorithm>

#include "control/goodput_reports.h"
#include "control/serve/job.h"
#include "control/serve/service.h"
#include "control/token.h"
#include "engine/goodput_placement.h"
#include "engine/goodput_round.h"
#include "engine/rng.h"

namespace tessera {

namespace {

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

GoodputModel& Service::goodput_model_locked(Job& j) {
  if (!j.goodput) j.goodput.emplace(batch_limits(j.row.spec.adaptive));
  return *j.goodput;
}

bool Service::goodput_round_due_locked(double t) const {
  if (!policy_.goodput) return false;
  // A new (or requeued, or preempted) adaptive job is planned at once, not a round later.
  return driver_.goodput_rounds().due(t, [&] {
    return std::any_of(pending_.begin(), pending_.end(), [&](const Job* j) {
      return adaptive_locked(*j) && j->round_members < 0 && j->unrunnable.empty() && !j->row.held;
    });
  });
}

void Service::goodput_round_locked(double t) {
  // The last round's restarts first: until they have exited, their GPUs are neither theirs nor
  // free.
  for (const auto& [id, jp] : active_) {
    if (!jp->resizing.empty()) return;
  }
  RoundPacer& rounds = driver_.goodput_rounds();
  rounds.began(t);
  struct Candidate {
    Job* job;
    int32_t members;  // it runs with now (0: waiting)
  };
  std::vector<Candidate> cands;
  std::vector<GoodputRoundJob> jobs;
  const auto add = [&](Job& j, bool running) {
    cands.push_back(Candidate{&j, running ? j.alloc.members() : 0});
    GoodputRoundJob r;
    r.model = &goodput_model_locked(j);
    r.spec = &j.spec;
    r.alloc = running ? &j.alloc : nullptr;
    r.attained_gpu_seconds = j.attained + (running ? run_gpu_seconds(j.row, j.alloc, t) : 0.0);
    r.run_seconds = j.ran_seconds + (running ? std::max(0.0, t - j.row.started_at) : 0.0);
    jobs.push_back(r);
  };
  for (const auto& [id, jp] : active_) {
    Job& j = *jp;
    if (adaptive_locked(j) && j.row.state == JobState::kRunning && !j.alloc.empty() &&
        !j.stopping) {
      add(j, true);
    }
  }
  for (Job* j : pending_) {
    if (adaptive_locked(*j) && j->unrunnable.empty() && !j->row.held && j->alloc.empty() &&
        dependencies_locked(j->row).state == DependencyState::kMet) {
      add(*j, false);
    }
  }
  if (cands.empty()) return;
  const uint64_t round = rounds.planned();
  const std::vector<int32_t> members = plan_goodput_round(
      jobs, state_, *policy_.scorer, opt_.goodput, mix_seed(policy_.seed, round), tree_.get());

  for (size_t k = 0; k < cands.size(); ++k) {
    Job& j = *cands[k].job;
    const int g = gpus_per_member(j.spec);
    j.round_members = members[k];
    if (members[k] > 0) {
      unqueue_locked(j.row.id);  // queued by the round_spec it had
      j.round_spec = j.spec;
      j.round_spec.min_members = j.round_spec.max_members = members[k];
    }
    if (cands[k].members == 0 || members[k] == cands[k].members) {
      dirty_ = true;
      continue;
    }
    // Running at another size from now: it checkpoints (its grace) and starts again.
    j.resizing = resize_message(cands[k].members * g, members[k] * g, "jobs");
    ++counters_.resizes;
    ask_to_stop_locked(j, t);
  }
}

std::string Service::report_token_locked(int64_t id) const {
  return hmac_sha256_hex(report_secret_, "job-report:" + std::to_string(id));
}

void Service::add_goodput_env_locked(Job& j,
                                     std::vector<std::pair<std::string, std::string>>& env) {
  const int gpus = j.alloc.members() * gpus_per_member(j.spec);
  const int nodes = std::max(1, nodes_of(j.alloc));
  const BatchSplit s = run_split(goodput_model_locked(j), nodes, gpus);
  std::vector<std::pair<std::string, std::string>> add = {
      {"TESSERA_GPUS", std::to_string(gpus)},
      {"TESSERA_NODES", std::to_string(nodes)},
      {"TESSERA_BATCH_SIZE", std::to_string(s.batch(gpus))},
      {"TESSERA_MICRO_BATCH", std::to_string(s.atomic_bsz)},
      {"TESSERA_ACCUM_STEPS", std::to_string(s.accum_steps)},
  };
  if (!opt_.api_url.empty()) {
    add.emplace_back("TESSERA_REPORT_URL", api_url_for_jobs_locked() + "/v1/jobs/" +
                                               std::to_string(j.row.id) + "/report");
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
  const int g = gpus_per_member(j.spec);
  GoodputModel& m = goodput_model_locked(j);
  take_report(m, r,
              ReportBounds{j.spec.max_members * g, static_cast<int>(cluster_.nodes().size()),
                           j.row.spec.adaptive.max_per_gpu});
  JobReportView v = report_view(m, j.alloc.members() * g, std::max(1, nodes_of(j.alloc)),
                                j.round_members < 0 ? -1 : j.round_members * g);
  v.job = id;
  return v;
}

}  // namespace tessera
