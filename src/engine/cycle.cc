#include "engine/cycle.h"

#include <algorithm>
#include <limits>
#include <tuple>
#include <unordered_set>

#include "engine/rng.h"

namespace tessera {

namespace {

constexpr double kNever = std::numeric_limits<double>::infinity();

// What makes two pending jobs equally hard to place; if one failed on the current scratch
// state, the other fails too (the state only fills up until a preemption frees something).
struct ShapeKey {
  MemberDemand demand;
  int32_t min_members, max_members;
  GpuTypeMask types;
  bool operator==(const ShapeKey&) const = default;
};
struct ShapeHash {
  size_t operator()(const ShapeKey& k) const {
    size_t h = std::hash<int64_t>()(k.demand.gpus * 1009 + k.demand.gpu_milli);
    h = h * 31 + std::hash<int64_t>()(k.demand.cpu_milli ^ (k.demand.mem_mib << 20));
    h = h * 31 + std::hash<int64_t>()(k.min_members * 65537 + k.max_members);
    return h * 31 + std::hash<uint64_t>()(k.types);
  }
};

int64_t milli_on_types(const Cluster& c, const Allocation& a, GpuTypeMask mask) {
  int64_t m = 0;
  for (const GpuShare& s : a.shares) {
    if (type_allowed(mask, c.node(c.node_of_gpu(s.gpu)).gpu_type)) m += s.milli;
  }
  return m;
}

// Whether every share of `a` fits on `state` right now.
bool fits(const ClusterState& state, const Allocation& a) {
  // Shares of one allocation are on distinct GPUs per member, but two members may share a GPU
  // (fractional gangs), so accumulate per GPU before comparing.
  std::vector<std::pair<GpuId, int32_t>> need;
  for (const GpuShare& s : a.shares) need.emplace_back(s.gpu, s.milli);
  std::sort(need.begin(), need.end());
  for (size_t i = 0; i < need.size();) {
    int32_t sum = 0;
    size_t j = i;
    for (; j < need.size() && need[j].first == need[i].first; ++j) sum += need[j].second;
    if (state.gpu_free(need[i].first) < sum) return false;
    i = j;
  }
  std::vector<std::pair<NodeId, int32_t>> nodes;
  for (NodeId n : a.member_node) nodes.emplace_back(n, 1);
  std::sort(nodes.begin(), nodes.end());
  for (size_t i = 0; i < nodes.size();) {
    int64_t k = 0;
    size_t j = i;
    for (; j < nodes.size() && nodes[j].first == nodes[i].first; ++j) ++k;
    if (state.node_free_cpu(nodes[i].first) < a.cpu_milli_per_member * k ||
        state.node_free_mem(nodes[i].first) < a.mem_mib_per_member * k) {
      return false;
    }
    i = j;
  }
  return true;
}

class Cycle {
 public:
  Cycle(const Snapshot& snap, const Policy& policy)
      : snap_(snap),
        policy_(policy),
        cluster_(snap.state->cluster()),
        scratch_(*snap.state),
        rng_(mix_seed(policy.seed, snap.cycle)),
        evicted_(snap.running.size(), false) {}

  Decisions run() {
    for (uint32_t idx : policy_.order->order(snap_)) consider(idx);
    return std::move(out_);
  }

 private:
  bool try_place(const JobSpec& job, Allocation& alloc) {
    if (policy_.scorer->place(scratch_, job, job.max_members, rng_, alloc)) return true;
    return job.min_members < job.max_members &&
           policy_.scorer->place(scratch_, job, job.min_members, rng_, alloc);
  }

  void consider(uint32_t idx) {
    const PendingJob& pj = snap_.pending[idx];
    const JobSpec& job = *pj.spec;
    PendingReason reason;
    reason.job = pj.id;
    reason.need_gpu_milli = job.gpu_milli_per_gang(job.min_members);
    reason.free_gpu_milli = scratch_.free_milli_matching(job.allowed_types);
    if (policy_.backfill == Backfill::kNone && head_ != kNoId) {
      reason.code = PendingCode::kBlockedByHead;
      reason.blocker = head_;
      out_.pending.push_back(reason);
      return;
    }
    // A job that could only start by eating into the reservation waits without trying to
    // place it: with a long queue behind a reserved head this is most of the queue.
    if (reservation_active_ &&
        backfit(must_use_reserved_types(job) ? reason.need_gpu_milli : 0, job) == Backfit::kNo) {
      wait_for_reservation(reason);
      return;
    }
    Allocation alloc;
    const ShapeKey shape{job.demand, job.min_members, job.max_members, job.allowed_types};
    bool placed = false;
    if (reason.free_gpu_milli >= reason.need_gpu_milli && !failed_.contains(shape)) {
      placed = try_place(job, alloc);
      if (!placed) failed_.insert(shape);
    }
    bool backfilled = false;
    if (placed && reservation_active_) {
      const int64_t overlap = milli_on_types(cluster_, alloc, reserved_types_);
      switch (backfit(overlap, job)) {
        case Backfit::kFree:
          break;
        case Backfit::kFromExtra:
          extra_milli_ -= overlap;
          break;
        case Backfit::kNo:
          scratch_.release(alloc);
          wait_for_reservation(reason);
          return;
      }
      backfilled = true;
    }
    if (placed) {
      record_start(pj, idx, std::move(alloc), backfilled);
      return;
    }
    if (policy_.preemption && try_preempt(pj, idx)) return;
    reason.code = reason.free_gpu_milli < reason.need_gpu_milli ? PendingCode::kInsufficientGpus
                                                                : PendingCode::kGangCannotFit;
    out_.pending.push_back(reason);
    if (head_ == kNoId && policy_.backfill != Backfill::kGreedy) {
      head_ = pj.id;
      if (policy_.backfill == Backfill::kEasy) reserve(job, reason.need_gpu_milli);
    }
  }

  // EASY's test for a job that would hold `overlap` milli-GPUs of the reserved types: it may
  // start freely (no overlap, or it ends before the shadow time), out of the capacity the head
  // job will not need, or not at all.
  enum class Backfit { kFree, kFromExtra, kNo };
  Backfit backfit(int64_t overlap, const JobSpec& job) const {
    const double est = job.duration_estimate;
    if (overlap == 0 || (est >= 0 && snap_.now + est <= shadow_time_)) return Backfit::kFree;
    return overlap <= extra_milli_ ? Backfit::kFromExtra : Backfit::kNo;
  }

  // Whether every GPU `job` could be placed on is of a type the reservation holds, so that its
  // overlap is known (its whole demand) before placing it.
  bool must_use_reserved_types(const JobSpec& job) const {
    if (job.demand.gpus == 0) return false;
    const GpuTypeMask present = cluster_.present_types();
    const GpuTypeMask mine = job.allowed_types == kAnyGpuType ? present : job.allowed_types;
    const GpuTypeMask reserved = reserved_types_ == kAnyGpuType ? present : reserved_types_;
    return (mine & ~reserved & present) == 0;
  }

  void wait_for_reservation(PendingReason& reason) {
    reason.code = PendingCode::kWaitingForReservation;
    reason.blocker = head_;
    out_.pending.push_back(reason);
  }

  void record_start(const PendingJob& pj, uint32_t idx, Allocation alloc, bool backfilled) {
    const double est = pj.spec->duration_estimate;
    started_.emplace_back(est >= 0 ? snap_.now + est : kNever, out_.starts.size());
    out_.starts.push_back(Start{pj.id, idx, std::move(alloc), backfilled});
  }

  // EASY: when will the head job fit, counting only GPUs of its types, and how much more than it
  // needs will be free then.
  void reserve(const JobSpec& job, int64_t need) {
    reservation_active_ = true;
    reserved_types_ = job.allowed_types;
    std::vector<std::pair<double, int64_t>> ends;
    for (size_t i = 0; i < snap_.running.size(); ++i) {
      const RunningJob& r = snap_.running[i];
      if (evicted_[i] || r.expected_end < 0) continue;
      ends.emplace_back(std::max(r.expected_end, snap_.now),
                        milli_on_types(cluster_, *r.alloc, reserved_types_));
    }
    for (const auto& [end, s] : started_) {
      if (end != kNever) {
        ends.emplace_back(end, milli_on_types(cluster_, out_.starts[s].alloc, reserved_types_));
      }
    }
    std::sort(ends.begin(), ends.end());
    int64_t free = scratch_.free_milli_matching(reserved_types_);
    shadow_time_ = kNever;
    extra_milli_ = 0;
    for (const auto& [end, milli] : ends) {
      free += milli;
      if (free >= need) {
        shadow_time_ = end;
        extra_milli_ = free - need;
        break;
      }
    }
  }

  // Frees running jobs of lower rank until `pj` fits, then keeps back every victim that was not
  // needed. Victims: lowest rank first, then least work lost since the last checkpoint, then
  // the youngest.
  bool try_preempt(const PendingJob& pj, uint32_t idx) {
    const JobSpec& job = *pj.spec;
    const int64_t rank = policy_.order->rank(job, pj.attained_gpu_seconds);
    if (running_rank_.empty() && !snap_.running.empty()) {
      // Ranks are fixed for the cycle (attained service is as of the snapshot): compute once.
      running_rank_.reserve(snap_.running.size());
      for (const RunningJob& r : snap_.running) {
        running_rank_.push_back(policy_.order->rank(*r.spec, r.attained_gpu_seconds));
        min_running_rank_ = std::min(min_running_rank_, running_rank_.back());
      }
    }
    if (rank <= min_running_rank_) return false;  // outranks nobody: the common case
    struct Candidate {
      int64_t rank;
      double lost;
      double start;
      JobId id;
      size_t index;
    };
    std::vector<Candidate> cands;
    int64_t available = scratch_.free_milli_matching(job.allowed_types);
    for (size_t i = 0; i < snap_.running.size(); ++i) {
      if (evicted_[i]) continue;
      const RunningJob& r = snap_.running[i];
      const int64_t rr = running_rank_[i];
      if (rr >= rank) continue;
      const int64_t m = milli_on_types(cluster_, *r.alloc, job.allowed_types);
      if (m == 0) continue;
      available += m;
      const double lost = r.spec->checkpoint_interval > 0
                              ? static_cast<double>(r.alloc->gpu_milli()) *
                                    std::max(0.0, snap_.now - r.last_checkpoint)
                              : 0.0;
      cands.push_back({rr, lost, r.start_time, r.id, i});
    }
    if (cands.empty() || available < job.gpu_milli_per_gang(job.min_members)) return false;
    std::sort(cands.begin(), cands.end(), [](const Candidate& a, const Candidate& b) {
      return std::make_tuple(a.rank, a.lost, -a.start, a.id) <
             std::make_tuple(b.rank, b.lost, -b.start, b.id);
    });
    std::vector<size_t> victims;
    Allocation alloc;
    bool placed = false;
    for (const Candidate& c : cands) {
      scratch_.release(*snap_.running[c.index].alloc);
      victims.push_back(c.index);
      if (try_place(job, alloc)) {
        placed = true;
        break;
      }
    }
    if (!placed) {
      for (size_t v : victims) scratch_.allocate(*snap_.running[v].alloc);
      return false;
    }
    // Keep back victims that were not needed, last chosen first.
    scratch_.release(alloc);
    std::vector<size_t> needed;
    for (size_t k = victims.size(); k-- > 0;) {
      const Allocation& va = *snap_.running[victims[k]].alloc;
      if (!fits(scratch_, va)) {
        needed.push_back(victims[k]);
        continue;
      }
      scratch_.allocate(va);
      Allocation probe;
      if (try_place(job, probe)) {
        scratch_.release(probe);  // still fits without this victim: keep it running
      } else {
        scratch_.release(va);
        needed.push_back(victims[k]);
      }
    }
    if (!try_place(job, alloc)) {
      // A randomised scorer may miss a placement that exists; undo everything.
      for (size_t v : victims) {
        if (std::find(needed.begin(), needed.end(), v) != needed.end()) {
          scratch_.allocate(*snap_.running[v].alloc);
        }
      }
      return false;
    }
    for (size_t v : needed) {
      evicted_[v] = true;
      out_.preemptions.push_back(Preemption{snap_.running[v].id, pj.id});
    }
    failed_.clear();  // capacity was freed: earlier failures may now fit
    record_start(pj, idx, std::move(alloc), false);
    return true;
  }

  const Snapshot& snap_;
  const Policy& policy_;
  const Cluster& cluster_;
  ClusterState scratch_;
  Rng rng_;
  Decisions out_;
  std::vector<bool> evicted_;
  std::vector<int64_t> running_rank_;  // by index in snap_.running, filled on first use
  int64_t min_running_rank_ = std::numeric_limits<int64_t>::max();
  std::unordered_set<ShapeKey, ShapeHash> failed_;
  std::vector<std::pair<double, size_t>> started_;  // (expected end, index into out_.starts)
  JobId head_ = kNoId;
  bool reservation_active_ = false;
  GpuTypeMask reserved_types_ = kAnyGpuType;
  double shadow_time_ = kNever;
  int64_t extra_milli_ = 0;
};

}  // namespace

Decisions schedule_cycle(const Snapshot& snap, const Policy& policy) {
  return Cycle(snap, policy).run();
}

}  // namespace tessera
