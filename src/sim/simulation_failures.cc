// Node failures in the simulation (sim/simulation.h): a node goes down and its jobs stop and
// wait again, the node comes back after its repair, and the recovery policy
// (SimOptions::recovery) may restart a stopped job in place of its lost members.
#include "sim/simulation.h"

#include <algorithm>
#include <cmath>
#include <span>
#include <vector>

namespace tessera::sim_detail {

namespace {

// Free room against what is needed, as the recovery policy's state sees it: none, some but
// too little, enough, plenty (four times as much or more).
uint8_t bucket(double have, double need) {
  if (have < need) return have > 0 ? 1 : 0;
  return have < 4 * need ? 2 : 3;
}

}  // namespace

// ---- node failures ----

// Node opt_.failures[i] goes down: every job with a member on it stops, loses the work since
// its last checkpoint (all of this run's for a job that checkpoints only when asked: a crash
// gives no warning) and waits again at once; the node takes nothing until it recovers.
// Returns whether anything changed (a node already down does not fail again).
bool Simulation::node_fail(uint32_t i) {
  const NodeFailure& f = opt_.failures[i];
  if (f.node >= down_.size() || down_[f.node]) return false;
  std::vector<JobId> hit;
  for (const RunningJob& r : running_.jobs()) {
    const JobId j = r.id;
    const auto& nodes = jobs_[j].alloc.member_node;
    if (std::find(nodes.begin(), nodes.end(), f.node) != nodes.end()) hit.push_back(j);
  }
  const auto record = static_cast<int32_t>(failure_records_.size());
  failure_records_.push_back(FailureRecord{now_, static_cast<uint32_t>(hit.size())});
  result_.failure.failures++;
  result_.failure.times.push_back(now_);
  result_.failure.jobs_hit += hit.size();
  if (hit.empty()) result_.failure.frt.push_back(0);
  std::vector<Allocation> before;
  for (JobId j : hit) before.push_back(jobs_[j].alloc);
  for (JobId j : hit) fail_job(j, record, f.node);
  // The node's whole capacity is held by a blocker while it is down.
  blockers_[f.node] = state_.free_on_node(f.node);
  state_.allocate(blockers_[f.node]);
  down_[f.node] = true;
  events_.push(now_ + f.repair_seconds, EventKind::kNodeRecover, f.node);
  for (size_t k = 0; k < hit.size(); ++k) recover(hit[k], before[k], f.node);
  return true;
}

void Simulation::node_recover(NodeId n) {
  if (!down_[n]) return;
  state_.release(blockers_[n]);
  blockers_[n] = Allocation{};
  down_[n] = false;
}

void Simulation::fail_job(JobId j, int32_t record, NodeId node) {
  JobState& js = jobs_[j];
  const JobSpec& s = w_.jobs[j];
  const double done = account_run(j);
  double kept = 0;
  if (s.checkpoint_interval > 0) {
    const double productive = std::max(0.0, now_ - js.run_start - js.restart_cost);
    kept = std::floor(productive / s.checkpoint_interval) * s.checkpoint_interval * js.speed;
  }
  js.remaining = std::max(0.0, js.remaining - kept);
  const double lost_gpu = js.speed > 0 ? (done - kept) / js.speed * run_gpus(js) : 0.0;
  result_.jobs[j].lost_work_seconds += done - kept;
  result_.failure.lost_gpu_seconds += lost_gpu;
  if (js.begun) write_event("fail", j);
  note(j, "node {} failed: {:g} GPU-hours of work lost; waiting again", c_.node(node).name,
       lost_gpu / 3600.0);
  stop_run(j, /*keep_usage=*/false);
  fair_.add_demand(s, amounts_of(s, s.min_members), +1);  // it wants to run again
  js.begun = false;
  js.phase = Phase::kPending;
  // Requeued in its place from its submission (queue orders rank arrival by submit time, for
  // preempted jobs too); its wait for starvation also counts from its submission.
  js.queued_since = s.submit_time;
  js.has_reason = false;
  js.recovering = record;
  add_pending(j);
}

// ---- recovery of the jobs a failure stopped (SimOptions::recovery) ----

uint32_t Simulation::racks_of(const Allocation& a) const {
  std::vector<RackId> racks;
  for (NodeId n : a.member_node) racks.push_back(c_.node(n).rack);
  std::sort(racks.begin(), racks.end());
  return static_cast<uint32_t>(std::unique(racks.begin(), racks.end()) - racks.begin());
}

void Simulation::recover(JobId j, const Allocation& before, NodeId failed) {
  if (opt_.recovery == nullptr) return;
  const JobSpec& s = w_.jobs[j];
  const Rack& rack = c_.racks()[c_.node(failed).rack];
  double rack_free = 0;
  for (NodeId n = rack.first_node; n < rack.first_node + rack.num_nodes; ++n) {
    rack_free += state_.node_free_whole(n);
  }
  int32_t lost = 0;
  for (NodeId n : before.member_node) lost += n == failed ? 1 : 0;
  const double gpus = static_cast<double>(before.gpu_milli()) / kMilliPerGpu;
  const double cluster_free =
      static_cast<double>(state_.free_milli_matching(kAnyGpuType)) / kMilliPerGpu;
  const size_t waiting = pending_.size();
  RecoveryState st;
  st.rack_free = bucket(rack_free, lost * std::max(1, s.demand.gpus));
  st.cluster_free = bucket(cluster_free, gpus);
  st.queue = static_cast<uint8_t>(waiting <= 1 ? 0 : waiting < 10 ? 1 : waiting < 100 ? 2 : 3);
  const RecoveryAction a = opt_.recovery->choose(st, recovery_rng_);
  recovery_choice_[j] = RecoveryChoice{st, a, now_, racks_of(before)};
  if (a == RecoveryAction::kRequeue) return;
  Allocation alloc;
  if (!restart_in_place(s, before, failed, a == RecoveryAction::kAnywhere, alloc)) return;
  pending_.remove(j);
  result_.failure.restarted_in_place++;
  if (jobs_[j].history >= 0) {
    note(j, "restarted in place of its lost members on {}", describe_placement(alloc));
  }
  start(j, std::move(alloc), 0.0, jobs_[j].limit_w);  // the power its failed run had
}

// The same members on the same GPUs, except those on the failed node, which move to free
// room in its rack (and, `anywhere`, then elsewhere). Leaves the ledger as it found it.
bool Simulation::restart_in_place(const JobSpec& s, const Allocation& before, NodeId failed,
                                  bool anywhere, Allocation& out) {
  out = before;
  const auto g = static_cast<size_t>(before.gpus_per_member);
  const int64_t cpu = before.cpu_milli_per_member, mem = before.mem_mib_per_member;
  std::vector<int32_t> done;
  auto undo = [&] {
    for (int32_t m : done) {
      const auto i = static_cast<size_t>(m);
      state_.release_member(out.member_node[i], std::span(out.shares).subspan(i * g, g), cpu, mem);
    }
    return false;
  };
  auto survivor_fits = [&](size_t i) {
    const NodeId n = out.member_node[i];
    if (state_.node_free_cpu(n) < cpu || state_.node_free_mem(n) < mem) return false;
    for (size_t k = 0; k < g; ++k) {
      if (state_.gpu_free(out.shares[i * g + k].gpu) < out.shares[i * g + k].milli) return false;
    }
    return true;
  };
  std::vector<size_t> lost;
  for (size_t i = 0; i < out.member_node.size(); ++i) {
    if (out.member_node[i] == failed) {
      lost.push_back(i);
      continue;
    }
    if (!survivor_fits(i)) return undo();
    state_.allocate_member(out.member_node[i], std::span(out.shares).subspan(i * g, g), cpu, mem);
    done.push_back(static_cast<int32_t>(i));
  }
  const Rack& rack = c_.racks()[c_.node(failed).rack];
  for (size_t i : lost) {
    NodeId chosen = kNoId;
    std::vector<GpuShare> shares;
    auto try_node = [&](NodeId n) {
      if (n == failed || down_[n] || !type_allowed(s.allowed_types, c_.node(n).gpu_type) ||
          !node_eligible(s.eligible_nodes.get(), n) || !state_.can_host(n, s.demand)) {
        return false;
      }
      shares.clear();
      return state_.pick_gpus(n, s.demand, /*pack=*/true, shares);
    };
    for (NodeId n = rack.first_node; n < rack.first_node + rack.num_nodes && chosen == kNoId; ++n) {
      if (try_node(n)) chosen = n;
    }
    for (NodeId n = 0; anywhere && chosen == kNoId && n < c_.nodes().size(); ++n) {
      if (try_node(n)) chosen = n;
    }
    if (chosen == kNoId) return undo();
    out.member_node[i] = chosen;
    std::copy(shares.begin(), shares.end(),
              out.shares.begin() + static_cast<std::ptrdiff_t>(i * g));
    state_.allocate_member(chosen, std::span(out.shares).subspan(i * g, g), cpu, mem);
    done.push_back(static_cast<int32_t>(i));
  }
  undo();  // start() allocates the whole of it
  return true;
}

}  // namespace tessera::sim_detail
