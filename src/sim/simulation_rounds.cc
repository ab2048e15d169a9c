// Round-based scheduling in the simulation (sim/simulation.h): Gavel's heterogeneity-aware
// rounds (SimOptions::round_seconds; sim/gavel_rounds.h) and Pollux's goodput rounds
// (Policy::goodput; sim/goodput_rounds.h), and the speed of a run on its placement.
#include "sim/simulation.h"

#include "engine/goodput_placement.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace tessera::sim_detail {

// ---- round-based scheduling (SimOptions::round_seconds; sim/gavel_rounds.h) ----

// A round boundary: the plan for the jobs that want to run, running jobs it moves preempted,
// waiting jobs it brings in started on their type (after the grace of this round's victims).
void Simulation::play_round() {
  std::vector<GavelCandidate> cands;
  const size_t types = c_.gpu_types().size();
  const auto candidate = [&](JobId j, GpuTypeId on) {
    JobState& js = jobs_[j];
    if (js.rounds_on.size() < types) js.rounds_on.resize(types, 0.0);
    GavelCandidate g;
    g.id = j;
    g.spec = &w_.jobs[j];
    g.running_on = on;
    g.attained = js.attained + run_gpus(js) * std::max(0.0, now_ - js.run_start);
    g.rounds_on = js.rounds_on;
    g.rounds = js.rounds;
    cands.push_back(g);
  };
  // Last round's plan no longer holds (a job still checkpointing restarts where it can).
  for (JobId j : planned_jobs_) jobs_[j].planned = kNoGpuType;
  planned_jobs_.clear();
  for (const RunningJob& r : running_.jobs()) {
    candidate(r.id, c_.node(jobs_[r.id].alloc.member_node.front()).gpu_type);
  }
  for (const PendingJob& p : pending_.jobs()) candidate(p.id, kNoGpuType);
  std::vector<GpuTypeId> plan =
      planner_.plan(c_, cands, policy_.heterogeneity, opt_.round_stay_factor, opt_.round_lp_jobs);
  result_.round_lp_solves = planner_.lp_solves();
  ++result_.rounds;
  // Who moves: running jobs the plan suspends or sends elsewhere give way first. A job the
  // plan sends to a type whose free GPUs cannot hold its gang now (the plan counts GPUs, not
  // nodes) stays where it runs: moving it would only suspend it.
  bool preempted = false;
  Rng trial(mix_seed(policy_.seed, result_.rounds * 31 + 7));
  for (size_t k = 0; k < cands.size(); ++k) {
    const JobId j = cands[k].id;
    Allocation a;
    if (cands[k].running_on != kNoGpuType && plan[k] != kNoGpuType &&
        plan[k] != cands[k].running_on && !place_on_type(j, plan[k], trial, a)) {
      plan[k] = cands[k].running_on;
    }
    jobs_[j].planned = plan[k];
    jobs_[j].rounds += 1;
    if (plan[k] != kNoGpuType) planned_jobs_.push_back(j);
    if (cands[k].running_on != kNoGpuType && plan[k] != cands[k].running_on) {
      preempt(j, j, PreemptionCause::kRound);
      preempted = true;
    }
  }
  // Who comes in: waiting jobs the plan gives a type, placed on it.
  Rng rng(mix_seed(policy_.seed, result_.rounds));
  const double delay = preempted ? opt_.checkpoint_grace : 0.0;
  std::vector<GpuTypeId> got = plan;  // the type each job runs on this round
  std::vector<size_t> misfits;
  for (size_t k = 0; k < cands.size(); ++k) {
    const JobId j = cands[k].id;
    if (cands[k].running_on != kNoGpuType || plan[k] == kNoGpuType) continue;
    if (start_on_planned_type(j, rng, delay)) {
      pending_.remove(j);
    } else {
      misfits.push_back(k);
    }
  }
  // A gang the plan gave a type that has the GPUs but not on the nodes it needs (the plan
  // counts GPUs, not how they are spread) tries the GPUs left free on its other types, the
  // fastest for it first, once every planned start is placed; otherwise it waits. Either way
  // it is counted where it ran, so that a type it cannot fit does not keep its claim forever
  // nor is it charged a round it did not run.
  for (size_t k : misfits) {
    const JobId j = cands[k].id;
    const JobSpec& s = w_.jobs[j];
    got[k] = kNoGpuType;
    std::vector<GpuTypeId> others;
    for (GpuTypeId t = 0; t < c_.gpu_types().size(); ++t) {
      if (t != plan[k] && c_.num_gpus_of_type(t) > 0 && type_allowed(s.allowed_types, t)) {
        others.push_back(t);
      }
    }
    std::stable_sort(others.begin(), others.end(), [&](GpuTypeId a, GpuTypeId b) {
      return type_throughput(c_, s, a) > type_throughput(c_, s, b);
    });
    for (GpuTypeId t : others) {
      jobs_[j].planned = t;
      if (start_on_planned_type(j, rng, delay)) {
        pending_.remove(j);
        got[k] = t;
        break;
      }
    }
    if (got[k] == kNoGpuType) jobs_[j].planned = kNoGpuType;
  }
  // The rounds each job ran on each type (this round's; a job moved to another type counts
  // there: it restarts there after its checkpoint).
  for (size_t k = 0; k < cands.size(); ++k) {
    if (got[k] != kNoGpuType) jobs_[cands[k].id].rounds_on[got[k]] += 1;
  }
}

// Where j's gang (at its minimum) would go on GPUs of type t now; false when it does not fit.
// Leaves the ledger as it found it.
bool Simulation::place_on_type(JobId j, GpuTypeId t, Rng& rng, Allocation& out) {
  JobSpec on_type = w_.jobs[j];
  on_type.allowed_types = GpuTypeMask{1} << t;
  if (!policy_.scorer->place(state_, on_type, on_type.min_members, rng, out)) return false;
  state_.release(out);
  return true;
}

// Places j on its planned type and starts it after `delay`; false when it does not fit.
bool Simulation::start_on_planned_type(JobId j, Rng& rng, double delay) {
  Allocation alloc;
  if (!place_on_type(j, jobs_[j].planned, rng, alloc)) return false;
  if (jobs_[j].history >= 0) {
    note(j, "placed on {} for this round (round-based scheduling)", describe_placement(alloc));
  }
  start(j, std::move(alloc), delay, 0.0);
  return true;
}

// The speed of j's run on its allocation. An adaptive job (goodput rounds) runs at 1: its
// remaining seconds are recomputed here from its training progress on this placement.
double Simulation::run_speed(JobId j) {
  JobState& js = jobs_[j];
  const PlacementShape shape = shape_of(c_, js.alloc);
  if (goodput_ && goodput_->adaptive(j)) {
    js.remaining = goodput_->seconds_left(j, shape);
    return 1.0;
  }
  return model_.speed(w_.jobs[j], w_, shape, c_);
}

// ---- goodput rounds (Policy::goodput; sim/goodput_rounds.h) ----

// A round boundary: running jobs report, the planner gives every job that wants to run a GPU
// count, and the jobs whose count changed are suspended (checkpoint grace), resized (a
// restart) or started. Shrinks and suspensions go first so that their GPUs are free for the
// rest; then larger jobs are placed before smaller ones (less fragmentation).
void Simulation::play_goodput_round() {
  ++result_.rounds;
  std::vector<GoodputCandidate> cands;
  for (const RunningJob& r : running_.jobs()) {
    const JobId j = r.id;
    const JobState& js = jobs_[j];
    const double elapsed = std::max(0.0, now_ - js.run_start);
    if (goodput_->adaptive(j)) {
      goodput_->report(j, shape_of(c_, js.alloc), std::max(0.0, elapsed - js.restart_cost));
    }
    cands.push_back(GoodputCandidate{j, static_cast<int>(std::lround(run_gpus(js))),
                                     js.attained + run_gpus(js) * elapsed, js.ran + elapsed});
  }
  for (const PendingJob& p : pending_.jobs()) {
    cands.push_back(GoodputCandidate{p.id, 0, jobs_[p.id].attained, jobs_[p.id].ran});
  }
  int gpus = 0, per_node = 1;
  for (NodeId n = 0; n < c_.nodes().size(); ++n) {
    if (down_[n]) continue;
    gpus += c_.node(n).num_gpus;
    per_node = std::max<int>(per_node, c_.node(n).num_gpus);
  }
  const std::vector<int> want = goodput_->plan(cands, gpus, per_node);
  std::vector<size_t> order(cands.size());
  for (size_t k = 0; k < order.size(); ++k) order[k] = k;
  // Shrinks first, then by size descending; ties by index (deterministic).
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const bool sa = want[a] < cands[a].current, sb = want[b] < cands[b].current;
    if (sa != sb) return sa;
    return want[a] > want[b];
  });
  // GPUs of the jobs suspended now: a job started on one begins after their checkpoint.
  std::vector<bool> checkpointing;
  for (size_t k : order) {
    if (cands[k].current > 0 && want[k] == 0) {
      if (checkpointing.empty()) checkpointing.assign(c_.num_gpus(), false);
      for (const GpuShare& sh : jobs_[cands[k].id].alloc.shares) checkpointing[sh.gpu] = true;
      preempt(cands[k].id, cands[k].id, PreemptionCause::kRound);
    }
  }
  const auto on_checkpointing = [&](const Allocation& a) {
    return !checkpointing.empty() &&
           std::any_of(a.shares.begin(), a.shares.end(),
                       [&](const GpuShare& sh) { return checkpointing[sh.gpu]; });
  };
  Rng rng(mix_seed(policy_.seed, result_.rounds));
  for (size_t k : order) {
    const JobId j = cands[k].id;
    if (want[k] == 0 || want[k] == cands[k].current) continue;
    const JobSpec& s = w_.jobs[j];
    const int per_member = std::max(1, s.demand.gpus);
    if (cands[k].current > 0) {
      // Resized: placed anew with its old GPUs counted free; where no size from the planned
      // one down fits, it keeps what it has.
      JobState& js = jobs_[j];
      state_.release(js.alloc);
      Resize r;
      r.job = j;
      r.grow = want[k] > cands[k].current;
      if (place_up_to(j, want[k] / per_member, rng, r.alloc) &&
          r.alloc.members() * per_member != cands[k].current) {
        resize(r, /*released=*/true);
      } else {
        state_.allocate(js.alloc);
      }
      continue;
    }
    Allocation alloc;
    if (place_up_to(j, want[k] / per_member, rng, alloc)) {
      pending_.remove(j);
      if (jobs_[j].history >= 0) {
        note(j, "started on {} by the goodput round", describe_placement(alloc));
      }
      const double delay = on_checkpointing(alloc) ? opt_.checkpoint_grace : 0.0;
      start(j, std::move(alloc), delay, 0.0);
    }
  }
}

// Where up to `members` members of j would go; false when nothing fits. Leaves the ledger as
// it found it (start() and resize() allocate). A rigid gang gets exactly its size. An adaptive job
// gets the size, from `members` down to one, whose placement has the best speedup as the scheduler
// knows it: where free GPUs are scattered, fewer GPUs on fewer nodes may train faster than more
// spread out.
bool Simulation::place_up_to(JobId j, int members, Rng& rng, Allocation& out) {
  const JobSpec& s = w_.jobs[j];
  if (!goodput_->adaptive(j)) {
    out = Allocation{};
    if (!policy_.scorer->place(state_, s, members, rng, out)) return false;
    state_.release(out);
    return true;
  }
  return place_best_size(
      state_, s, 1, members, *policy_.scorer, rng,
      [&](int nodes, int gpus) { return goodput_->speedup(j, nodes, gpus); }, out);
}

}  // namespace tessera::sim_detail
