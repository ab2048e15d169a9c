// Small builders shared by the engine tests.
#pragma once

#include <deque>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "engine/decisions.h"
#include "engine/snapshot.h"
#include "model/cluster.h"
#include "model/cluster_spec.h"
#include "model/cluster_state.h"
#include "model/job.h"
#include "model/queue_tree.h"

namespace tessera::testing {

inline JobSpec gang(const std::string& name, int members, int gpus_per_member = 1,
                    double submit = 0, TenantId tenant = 0,
                    PriorityClass prio = PriorityClass::kResearch) {
  JobSpec s;
  s.name = name;
  s.min_members = s.max_members = members;
  s.demand.gpus = gpus_per_member;
  s.submit_time = submit;
  s.tenant = tenant;
  s.priority = prio;
  s.work_seconds = 100;
  return s;
}

inline JobSpec fractional(const std::string& name, int milli, double submit = 0) {
  JobSpec s = gang(name, 1, 1, submit);
  s.demand.gpu_milli = milli;
  return s;
}

// A queue for QueueTree::add: weight, guaranteed GPUs, and a GPU limit (< 0: none).
inline QueueSpec queue_spec(const std::string& name, double weight = 1, int64_t guarantee_gpus = 0,
                            int64_t limit_gpus = -1) {
  QueueSpec s;
  s.name = name;
  s.weight = weight;
  s.guarantee[kGpuDim] = guarantee_gpus * kMilliPerGpu;
  if (limit_gpus >= 0) s.limit[kGpuDim] = limit_gpus * kMilliPerGpu;
  return s;
}

// Owns the jobs, allocations and vectors a Snapshot points into.
struct World {
  explicit World(Cluster c) : cluster(std::move(c)), state(cluster) {}
  Cluster cluster;
  ClusterState state;
  std::deque<JobSpec> specs;  // deque: stable addresses
  std::deque<Allocation> allocs;
  std::vector<PendingJob> pending;
  std::vector<RunningJob> running;
  const QueueTree* queues = nullptr;  // not owned; null = one equal queue per tenant
  double now = 0;

  JobId add_pending(JobSpec s, double attained = 0) {
    specs.push_back(std::move(s));
    const auto id = static_cast<JobId>(specs.size() - 1);
    pending.push_back(PendingJob{id, &specs.back(), attained, specs.back().submit_time});
    return id;
  }
  // Adds a running job holding `a` (allocated on state).
  JobId add_running(JobSpec s, Allocation a, double start = 0, double expected_end = kUnknown,
                    double attained = 0) {
    specs.push_back(std::move(s));
    allocs.push_back(std::move(a));
    state.allocate(allocs.back());
    const auto id = static_cast<JobId>(specs.size() - 1);
    RunningJob r;
    r.id = id;
    r.spec = &specs.back();
    r.alloc = &allocs.back();
    r.start_time = start;
    r.expected_end = expected_end;
    r.attained_gpu_seconds = attained;
    r.last_checkpoint = start;
    running.push_back(r);
    return id;
  }
  Snapshot snapshot(uint64_t cycle = 0) const {
    Snapshot snap;
    snap.now = now;
    snap.cycle = cycle;
    snap.state = &state;
    snap.pending = pending;
    snap.running = running;
    snap.queues = queues;
    return snap;
  }
};

// Whole GPUs [first, first+count) of node n, one member.
inline Allocation whole_gpus(const Cluster& c, NodeId n, int first, int count) {
  Allocation a;
  a.gpus_per_member = count;
  a.member_node.push_back(n);
  for (int g = first; g < first + count; ++g) {
    a.shares.push_back({c.node(n).first_gpu + static_cast<GpuId>(g), kMilliPerGpu});
  }
  return a;
}

inline const Start* find_start(const Decisions& d, JobId id) {
  for (const Start& s : d.starts) {
    if (s.job == id) return &s;
  }
  return nullptr;
}

inline const PendingReason* find_reason(const Decisions& d, JobId id) {
  for (const PendingReason& r : d.pending) {
    if (r.job == id) return &r;
  }
  return nullptr;
}

// Applying the decisions to a copy of the state never over-commits (allocate() throws if so).
inline void apply(const World& w, const Decisions& d) {
  ClusterState s = w.state;
  for (const Preemption& p : d.preemptions) {
    for (const RunningJob& r : w.running) {
      if (r.id == p.job) s.release(*r.alloc);
    }
  }
  for (const Start& st : d.starts) ASSERT_NO_THROW(s.allocate(st.alloc));
}

}  // namespace tessera::testing
