#include "sim/engine_fixture.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "model/cluster_spec.h"

namespace tessera {

EngineFixture::EngineFixture(const EngineFixtureSpec& spec) {
  if (spec.nodes < 1) throw std::invalid_argument("nodes must be at least 1");
  constexpr int kMaxGpusPerNode = 1024;  // as the cluster readers allow
  if (spec.gpus_per_node < 1 || spec.gpus_per_node > kMaxGpusPerNode) {
    throw std::invalid_argument("GPUs per node must be 1.." + std::to_string(kMaxGpusPerNode));
  }
  if (spec.nodes_per_rack < 1) throw std::invalid_argument("nodes per rack must be at least 1");
  if (spec.gang < 1) throw std::invalid_argument("a gang has at least 1 member");
  if (spec.pending < 0) throw std::invalid_argument("pending jobs must be 0 or more");
  // Exactly `nodes` nodes: full racks of nodes_per_rack, and the rest in a last, smaller rack
  // (rounding up to whole racks timed a larger cluster than the one named).
  ClusterBuilder b;
  const GpuTypeId type = b.gpu_types().known("A100-80G");
  for (int n = 0; n < spec.nodes; ++n) {
    b.add_node("spine-0", "rack-" + std::to_string(n / spec.nodes_per_rack),
               "node-" + std::to_string(n), type, static_cast<uint16_t>(spec.gpus_per_node), 64000,
               524288);
  }
  cluster_ = std::make_unique<Cluster>(b.build());
  state_ = std::make_unique<ClusterState>(*cluster_);
  for (int t = 0; t < std::max(1, spec.tenants); ++t) {
    workload_.tenants.intern("tenant-" + std::to_string(t));
  }
  const auto tenant_of = [&](size_t i) {
    return static_cast<TenantId>(i % workload_.tenants.size());
  };
  // Pre-fill: every node gets the same number of busy GPUs, held by one running job per node.
  const int busy = static_cast<int>(spec.fill * spec.gpus_per_node);
  if (busy > 0) {
    workload_.jobs.reserve(cluster_->nodes().size() + spec.pending);
    for (NodeId n = 0; n < cluster_->nodes().size(); ++n) {
      Allocation a;
      a.gpus_per_member = busy;
      a.member_node.push_back(n);
      for (int g = 0; g < busy; ++g) {
        a.shares.push_back({cluster_->node(n).first_gpu + static_cast<GpuId>(g), kMilliPerGpu});
      }
      state_->allocate(a);
      fill_allocs_.push_back(std::move(a));
      JobSpec s;
      s.name = "fill-" + std::to_string(n);
      s.demand.gpus = busy;
      s.tenant = tenant_of(n);
      workload_.jobs.push_back(s);
    }
  }
  if (spec.freed_gpus > 0 && !fill_allocs_.empty()) {
    // A job on node 0 ended: the first `freed_gpus` of its GPUs are free again.
    Allocation& a = fill_allocs_.front();
    const int n = std::min<int>(spec.freed_gpus, static_cast<int>(a.shares.size()));
    Allocation gone;
    gone.gpus_per_member = n;
    gone.member_node.push_back(0);
    gone.shares.assign(a.shares.begin(), a.shares.begin() + n);
    state_->release(gone);
    a.shares.erase(a.shares.begin(), a.shares.begin() + n);
    a.gpus_per_member -= n;
    workload_.jobs.front().demand.gpus -= n;
  }
  const size_t first_pending = workload_.jobs.size();
  for (int i = 0; i < spec.pending; ++i) {
    JobSpec s;
    s.name = "job-" + std::to_string(i);
    s.submit_time = i;
    s.min_members = s.max_members = spec.gang;
    s.work_seconds = 3600;
    s.tenant = tenant_of(static_cast<size_t>(i));
    workload_.jobs.push_back(s);
  }
  for (size_t i = 0; i < fill_allocs_.size(); ++i) {
    RunningJob r;
    r.id = static_cast<JobId>(i);
    r.spec = &workload_.jobs[i];
    r.alloc = &fill_allocs_[i];
    running_.push_back(r);
  }
  for (size_t i = first_pending; i < workload_.jobs.size(); ++i) {
    pending_.push_back(
        PendingJob{static_cast<JobId>(i), &workload_.jobs[i], 0, workload_.jobs[i].submit_time});
  }
  if (spec.order != nullptr) {
    queue_ = std::make_unique<PendingQueue>(*spec.order);
    for (PendingJob p : pending_) {
      p.wants_reason = false;
      queue_->add(p);
    }
    running_set_ = std::make_unique<RunningSet>(*cluster_, FairnessSettings{}, spec.order);
    for (const RunningJob& r : running_) running_set_->add(r);
  }
}

Snapshot EngineFixture::snapshot() const {
  Snapshot s;
  s.now = 1e6;
  s.state = state_.get();
  s.pending = pending_;
  s.running = running_;
  if (queue_) {
    s.pending = queue_->jobs();
    s.pending_queue = queue_.get();
    s.running = running_set_->jobs();
    s.running_set = running_set_.get();
    s.scratch = state_.get();
  }
  return s;
}

}  // namespace tessera
