// Data staging in the simulation (sim/simulation.h; docs/data.md): a run's wait for its dataset,
// the cycle's locality preferences, and pre-staging for waiting jobs.
#include <algorithm>
#include <cmath>
#include <limits>

#include "sim/simulation.h"

namespace tessera::sim_detail {

double Simulation::stage_data(JobId j, double delay) {
  const JobSpec& s = w_.jobs[j];
  const JobState& js = jobs_[j];
  const double wait =
      data_->start(s.dataset, w_.datasets[s.dataset], js.alloc, now_ + delay, run_gpus(js));
  if (wait > 0 && js.queued_since >= now_) data_->add_unqueued_staging(wait * run_gpus(js));
  if (js.history >= 0 && wait > 0) {
    note(j, "waits {:.0f} s for its dataset {} to reach its nodes", wait,
         w_.datasets[s.dataset].name);
  }
  return wait;
}

void Simulation::release_data(JobId j) {
  const JobSpec& s = w_.jobs[j];
  if (data_ && s.dataset != kNoId) data_->release(s.dataset, jobs_[j].alloc);
}

double Simulation::join_stream(JobId j) {
  const JobSpec& s = w_.jobs[j];
  const Dataset& ds = w_.datasets[s.dataset];
  const int gpus = static_cast<int>(std::lround(run_gpus(jobs_[j])));
  if (data_->read_source(ds) != DataStaging::Source::kObject ||
      DataStaging::need_gbs(ds, gpus) <= 0) {
    return data_->stream_factor(ds, gpus);
  }
  streams_.push_back(j);
  share_streams(j);
  return jobs_[j].data_speed;
}

void Simulation::leave_stream(JobId j) {
  const auto it = std::find(streams_.begin(), streams_.end(), j);
  if (it == streams_.end()) return;
  streams_.erase(it);
  share_streams(kNoId);
}

void Simulation::share_streams(JobId joining) {
  std::vector<double> needs;
  for (const JobId k : streams_) {
    const int gpus = static_cast<int>(std::lround(run_gpus(jobs_[k])));
    needs.push_back(DataStaging::need_gbs(w_.datasets[w_.jobs[k].dataset], gpus));
  }
  const std::vector<double> shares = data_->object_shares(needs);
  for (size_t i = 0; i < streams_.size(); ++i) {
    const JobId k = streams_[i];
    JobState& ks = jobs_[k];
    const double f = std::min(1.0, shares[i] / needs[i]);
    if (k == joining) {
      ks.data_speed = f;  // its run is being set up: start() applies it
    } else if (std::abs(f - ks.data_speed) > 1e-12) {
      rerate(k, [&] {
        ks.speed = ks.speed / ks.data_speed * f;
        ks.data_speed = f;
      });
    }
  }
}

void Simulation::want_data(JobId j, int delta) {
  const JobSpec& s = w_.jobs[j];
  if (!data_ || s.dataset == kNoId) return;
  data_wanted_[s.dataset] += delta;
  data_->set_wanted(data_wanted_);
}

void Simulation::prefer_data_nodes(Snapshot& snap) {
  preferred_.clear();
  std::vector<std::shared_ptr<const NodeSet>> where(w_.datasets.size());
  std::vector<bool> looked(w_.datasets.size(), false);
  for (const PendingJob& p : pending_.jobs()) {
    const uint32_t d = w_.jobs[p.id].dataset;
    if (d == kNoId) continue;
    if (!looked[d]) {
      where[d] = data_->nodes_with(d);
      looked[d] = true;
    }
    if (where[d] != nullptr) preferred_[p.id] = where[d];
  }
  snap.preferred_nodes = &preferred_;
  snap.locality_wait_seconds = opt_.locality_wait;
}

void Simulation::prestage_waiting() {
  prestage_more();
  // More is pre-staged when a transfer ends (a cycle then), not only at the next job event.
  const double next = data_->next_prestage_done(now_);
  if (next < std::numeric_limits<double>::infinity() && next > prestage_tick_) {
    events_.push(next, EventKind::kTick);
    prestage_tick_ = next;
  }
}

void Simulation::prestage_more() {
  const ClusterStorage& st = c_.storage();
  const int slots = std::max(1, static_cast<int>(std::lround(opt_.prestage_gbs / st.per_job_gbs)));
  if (data_->prestaging(now_) >= slots) return;
  const double per_transfer = opt_.prestage_gbs / slots;
  // Where a waiting job is expected to go: nodes with the most whole GPUs free now, then those
  // whose running jobs are expected to end first (what the scheduler believes: estimates).
  std::vector<double> frees_at(c_.nodes().size(), 0);
  for (const RunningJob& r : running_.jobs()) {
    const double end =
        r.expected_end >= 0 ? r.expected_end : std::numeric_limits<double>::infinity();
    for (const NodeId n : r.alloc->member_node) frees_at[n] = std::max(frees_at[n], end);
  }
  std::vector<NodeId> order(c_.nodes().size());
  for (NodeId n = 0; n < order.size(); ++n) order[n] = n;
  std::stable_sort(order.begin(), order.end(), [&](NodeId a, NodeId b) {
    const int fa = state_.node_free_whole(a), fb = state_.node_free_whole(b);
    if (fa != fb) return fa > fb;
    return frees_at[a] < frees_at[b];
  });
  int jobs = 0;
  for (const PendingJob& p : pending_.jobs()) {
    if (jobs >= opt_.prestage_jobs) break;
    const JobSpec& s = w_.jobs[p.id];
    if (s.dataset == kNoId) continue;
    ++jobs;
    const Dataset& ds = w_.datasets[s.dataset];
    const int gpus = std::max(1, s.demand.gpus) * s.min_members;
    const int per_node = std::max<int>(1, c_.max_node_gpus());
    int need = (gpus + per_node - 1) / per_node;
    for (const NodeId n : order) {
      if (need <= 0) break;
      if (down_[n]) continue;
      if (data_->on_node(s.dataset, n)) {
        --need;
        continue;
      }
      if (data_->prestaging(now_) >= slots) return;
      if (data_->prestage(s.dataset, ds, n, now_, per_transfer)) --need;
    }
  }
  // Idle nodes are where the next arrivals go: they get the datasets most wanted by waiting and
  // running jobs (the most wanted first), each dataset on one more idle node per pass.
  std::vector<uint32_t> popular;
  for (uint32_t d = 0; d < data_wanted_.size(); ++d) {
    if (data_wanted_[d] > 0) popular.push_back(d);
  }
  std::stable_sort(popular.begin(), popular.end(),
                   [&](uint32_t a, uint32_t b) { return data_wanted_[a] > data_wanted_[b]; });
  for (const uint32_t d : popular) {
    for (const NodeId n : order) {
      if (down_[n] || state_.node_free_whole(n) < c_.node(n).num_gpus) continue;
      if (data_->on_node(d, n)) continue;
      if (data_->prestaging(now_) >= slots) return;
      if (data_->prestage(d, w_.datasets[d], n, now_, per_transfer)) break;
    }
  }
}

}  // namespace tessera::sim_detail
