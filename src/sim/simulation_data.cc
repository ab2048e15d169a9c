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
      data_->start(s.dataset, w_.datasets[s.dataset], js.alloc, now_ + delay, run_gpus(js),
                   /*unqueued=*/js.queued_since >= now_);
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
  if (opt_.residency) keep_resident(slots, per_transfer);
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
      if (down_[n] || !node_idle(n)) continue;
      if (data_->on_node(d, n)) continue;
      if (data_->prestaging(now_) >= slots) return;
      if (data_->prestage(d, w_.datasets[d], n, now_, per_transfer)) break;
    }
  }
}

// Each dataset wanted by waiting and running jobs gets as many home nodes as its share of their
// GPUs (largest remainders; at least one while wanted). Homes move as little as they can: a
// node keeps its home while that dataset still has room for it, and a dataset takes first the
// nodes that hold it already, then idle ones. Homes' copies are pre-staged on idle nodes (a busy
// node's NVMe is its running jobs').
void Simulation::keep_resident(int slots, double per_transfer) {
  const double nvme_gb = c_.storage().nvme_gb;
  std::vector<double> demand(w_.datasets.size(), 0);
  const auto want = [&](JobId j, double gpus) {
    const uint32_t d = w_.jobs[j].dataset;
    if (d != kNoId && w_.datasets[d].size_gb <= nvme_gb) demand[d] += gpus;
  };
  for (const PendingJob& p : pending_.jobs()) {
    const JobSpec& s = w_.jobs[p.id];
    want(p.id, static_cast<double>(std::max(1, s.demand.gpus) * s.min_members));
  }
  for (const RunningJob& r : running_.jobs()) {
    want(r.id, static_cast<double>(r.alloc->gpu_milli()) / kMilliPerGpu);
  }
  double total = 0;
  for (const double g : demand) total += g;
  std::vector<NodeId> up;
  for (NodeId n = 0; n < c_.nodes().size(); ++n) {
    if (!down_[n]) up.push_back(n);
  }
  if (total <= 0 || up.empty()) return;
  // Targets: largest remainders of the nodes' share by demand, at least one while wanted.
  const size_t nodes = up.size();
  std::vector<size_t> target(demand.size(), 0);
  std::vector<std::pair<double, uint32_t>> rest;
  size_t given = 0;
  for (uint32_t d = 0; d < demand.size(); ++d) {
    if (demand[d] <= 0) continue;
    const double exact = static_cast<double>(nodes) * demand[d] / total;
    target[d] = std::max<size_t>(1, static_cast<size_t>(exact));
    given += target[d];
    rest.emplace_back(exact - std::floor(exact), d);
  }
  std::stable_sort(rest.begin(), rest.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  for (size_t k = 0; given < nodes && k < rest.size(); ++k, ++given) ++target[rest[k].second];
  // Keep homes that still fit their dataset's target; free the others.
  std::vector<size_t> have(demand.size(), 0);
  std::vector<NodeId> free_nodes;
  for (const NodeId n : up) {
    const int64_t h = data_->home(n);
    if (h >= 0 && have[static_cast<size_t>(h)] < target[static_cast<size_t>(h)]) {
      ++have[static_cast<size_t>(h)];
    } else {
      data_->set_home(n, -1);
      free_nodes.push_back(n);
    }
  }
  // Datasets short of their target take nodes that hold them, then idle nodes, then any.
  const auto score = [&](uint32_t d, NodeId n) {
    return (data_->on_node(d, n) ? 2 : 0) + (node_idle(n) ? 1 : 0);
  };
  for (uint32_t d = 0; d < demand.size(); ++d) {
    while (have[d] < target[d] && !free_nodes.empty()) {
      const auto best =
          std::max_element(free_nodes.begin(), free_nodes.end(),
                           [&](NodeId a, NodeId b) { return score(d, a) < score(d, b); });
      data_->set_home(*best, d);
      ++have[d];
      free_nodes.erase(best);
    }
  }
  // Idle homes without their copy get it ahead.
  for (const NodeId n : up) {
    const int64_t h = data_->home(n);
    if (h < 0 || data_->on_node(static_cast<uint32_t>(h), n)) continue;
    if (!node_idle(n)) continue;
    if (data_->prestaging(now_) >= slots) return;
    data_->prestage(static_cast<uint32_t>(h), w_.datasets[static_cast<size_t>(h)], n, now_,
                    per_transfer);
  }
}

}  // namespace tessera::sim_detail
