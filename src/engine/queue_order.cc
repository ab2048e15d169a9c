#include "engine/queue_order.h"

#include <algorithm>
#include <array>
#include <limits>
#include <numeric>
#include <queue>
#include <tuple>

namespace tessera {

int64_t QueueOrder::rank(const JobSpec& job, double) const {
  return static_cast<int64_t>(job.priority);
}

namespace {

std::vector<uint32_t> iota_indices(size_t n) {
  std::vector<uint32_t> idx(n);
  std::iota(idx.begin(), idx.end(), 0u);
  return idx;
}

// Sorts by (priority class desc, key asc, submit time asc, id asc): total and deterministic.
// Arrival is the submit time, not the time a job was last requeued: a preempted job keeps its
// place ahead of the equal jobs that came after it (issue 15, defect 2), so neither the order
// nor the reservation made for the first blocked job can invert arrival within a queue.
template <typename Key>
std::vector<uint32_t> sort_by(const Snapshot& snap, Key key) {
  auto idx = iota_indices(snap.pending.size());
  std::vector<double> keys(snap.pending.size());
  for (size_t i = 0; i < keys.size(); ++i) keys[i] = key(snap.pending[i]);
  auto less = [&](uint32_t a, uint32_t b) {
    const PendingJob& x = snap.pending[a];
    const PendingJob& y = snap.pending[b];
    return std::make_tuple(-static_cast<int>(x.spec->priority), keys[a], x.spec->submit_time,
                           x.id) <
           std::make_tuple(-static_cast<int>(y.spec->priority), keys[b], y.spec->submit_time, y.id);
  };
  // Callers that keep their queue in arrival order (the simulator does) pay O(n) here.
  if (!std::is_sorted(idx.begin(), idx.end(), less)) std::sort(idx.begin(), idx.end(), less);
  return idx;
}

class FifoOrder final : public QueueOrder {
 public:
  std::string_view name() const override { return "fifo"; }
  std::vector<uint32_t> order(const Snapshot& snap, const QueueShares&) const override {
    return sort_by(snap, [](const PendingJob&) { return 0.0; });
  }
};

class SjfOrder final : public QueueOrder {
 public:
  std::string_view name() const override { return "sjf"; }
  std::vector<uint32_t> order(const Snapshot& snap, const QueueShares&) const override {
    return sort_by(snap, [](const PendingJob& p) {
      const double est = p.spec->duration_estimate;
      return est >= 0 ? est : std::numeric_limits<double>::infinity();
    });
  }
};

// Helios' Quasi-Shortest-Service-First (Hu et al., SC'21): the smallest predicted GPU service
// (GPUs of the gang x duration estimate) first; unknown estimates last.
class QssfOrder final : public QueueOrder {
 public:
  std::string_view name() const override { return "qssf"; }
  std::vector<uint32_t> order(const Snapshot& snap, const QueueShares&) const override {
    return sort_by(snap, [](const PendingJob& p) {
      const JobSpec& s = *p.spec;
      const double est = s.duration_estimate;
      if (est < 0) return std::numeric_limits<double>::infinity();
      return static_cast<double>(s.gpu_milli_per_gang(s.min_members)) / kMilliPerGpu * est;
    });
  }
};

class LasOrder final : public QueueOrder {
 public:
  explicit LasOrder(std::vector<double> thresholds) : thresholds_(std::move(thresholds)) {
    std::sort(thresholds_.begin(), thresholds_.end());
  }
  std::string_view name() const override { return "las"; }
  bool time_dependent() const override { return true; }
  int level(double attained) const {
    return static_cast<int>(std::upper_bound(thresholds_.begin(), thresholds_.end(), attained) -
                            thresholds_.begin());
  }
  std::vector<uint32_t> order(const Snapshot& snap, const QueueShares&) const override {
    return sort_by(snap, [this](const PendingJob& p) {
      return static_cast<double>(level(p.attained_gpu_seconds));
    });
  }
  int64_t rank(const JobSpec& job, double attained) const override {
    // Priority class dominates; within a class a lower queue outranks a higher one.
    return static_cast<int64_t>(job.priority) * 1024 - level(attained);
  }

 private:
  std::vector<double> thresholds_;
};

class DrfOrder final : public QueueOrder {
 public:
  std::string_view name() const override { return "drf"; }
  std::vector<uint32_t> order(const Snapshot& snap, const QueueShares& shares) const override {
    // Dominant share per tenant. GPUs are the dominant resource of every GPU job we model;
    // CPU and memory shares are counted too so CPU-only pods are ordered fairly.
    const Cluster& c = snap.state->cluster();
    double total_gpu = static_cast<double>(c.num_gpus()) * kMilliPerGpu, total_cpu = 0,
           total_mem = 0;
    for (const Node& n : c.nodes()) {
      total_cpu += static_cast<double>(n.cpu_milli);
      total_mem += static_cast<double>(n.mem_mib);
    }
    auto dominant = [&](double gpu, double cpu, double mem) {
      return std::max({total_gpu > 0 ? gpu / total_gpu : 0.0, total_cpu > 0 ? cpu / total_cpu : 0.0,
                       total_mem > 0 ? mem / total_mem : 0.0});
    };
    struct Usage {
      double gpu = 0, cpu = 0, mem = 0;
    };
    std::vector<Usage> usage;
    auto grow = [&](TenantId t) {
      if (t >= usage.size()) usage.resize(t + 1);
    };
    for (const RunningJob& r : snap.running) {
      grow(r.spec->tenant);
      Usage& u = usage[r.spec->tenant];
      u.gpu += static_cast<double>(r.alloc->gpu_milli());
      u.cpu += static_cast<double>(r.alloc->cpu_milli_per_member * r.alloc->members());
      u.mem += static_cast<double>(r.alloc->mem_mib_per_member * r.alloc->members());
    }
    // Per tenant, its pending jobs in FIFO order (priority class first).
    auto fifo = sort_by(snap, [](const PendingJob&) { return 0.0; });
    std::vector<std::vector<uint32_t>> queues;
    for (uint32_t i : fifo) {
      const TenantId t = snap.pending[i].spec->tenant;
      grow(t);
      if (t >= queues.size()) queues.resize(t + 1);
      queues[t].push_back(i);
    }
    // Progressive filling: repeatedly take the head of the tenant with the lowest weighted
    // dominant share, assuming it starts. Ties break by tenant id for determinism.
    using Entry = std::tuple<int, double, TenantId>;  // (-priority of head, share, tenant)
    std::priority_queue<Entry, std::vector<Entry>, std::greater<>> heap;
    std::vector<size_t> head(queues.size(), 0);
    auto push = [&](TenantId t) {
      if (head[t] >= queues[t].size()) return;
      const Usage& u = usage[t];
      const double share =
          dominant(u.gpu, u.cpu, u.mem) / shares.tree->queue(shares.leaf_of(t)).weight;
      heap.emplace(-static_cast<int>(snap.pending[queues[t][head[t]]].spec->priority), share, t);
    };
    for (TenantId t = 0; t < queues.size(); ++t) push(t);
    std::vector<uint32_t> out;
    out.reserve(snap.pending.size());
    while (!heap.empty()) {
      const TenantId t = std::get<2>(heap.top());
      heap.pop();
      const uint32_t i = queues[t][head[t]++];
      out.push_back(i);
      const JobSpec& s = *snap.pending[i].spec;
      usage[t].gpu += static_cast<double>(s.gpu_milli_per_gang(s.max_members));
      usage[t].cpu += static_cast<double>(s.demand.cpu_milli * s.max_members);
      usage[t].mem += static_cast<double>(s.demand.mem_mib * s.max_members);
      push(t);
    }
    return out;
  }
};

class FairOrder final : public QueueOrder {
 public:
  std::string_view name() const override { return "fair"; }
  bool reads_shares() const override { return true; }
  std::vector<uint32_t> order(const Snapshot& snap, const QueueShares& sh) const override {
    // Class first, then earliest deadline, then arrival: the order within each queue.
    const auto sorted = sort_by(snap, [](const PendingJob& p) {
      const double sla = p.spec->sla_max_queueing;
      return sla >= 0 ? p.spec->submit_time + sla : std::numeric_limits<double>::infinity();
    });
    const QueueTree& tree = *sh.tree;
    const size_t n = tree.size();
    // Usage so far, grown as the progressive filling assumes jobs start.
    std::vector<std::array<double, kNumDims>> eff(n);
    for (QueueId q = 0; q < n; ++q) {
      for (size_t d = 0; d < kNumDims; ++d) eff[q][d] = static_cast<double>(sh.usage[q][d]);
    }
    auto ratio = [&](QueueId q) {
      double r = 0;
      for (size_t d = 0; d < kNumDims; ++d) {
        if (eff[q][d] <= 0) continue;
        if (sh.entitled[q][d] <= 0) return std::numeric_limits<double>::infinity();
        r = std::max(r, eff[q][d] / static_cast<double>(sh.entitled[q][d]));
      }
      return r;
    };
    std::vector<uint32_t> out;
    out.reserve(sorted.size());
    std::vector<std::vector<uint32_t>> jobs(n);
    std::vector<size_t> head(n, 0), count(n, 0);
    for (size_t begin = 0; begin < sorted.size();) {
      // One priority class at a time: every class outranks the fairness between queues.
      const PriorityClass tier = snap.pending[sorted[begin]].spec->priority;
      size_t end = begin;
      for (; end < sorted.size() && snap.pending[sorted[end]].spec->priority == tier; ++end) {
        const QueueId leaf = sh.leaf_of(snap.pending[sorted[end]].spec->tenant);
        jobs[leaf].push_back(sorted[end]);
        for (QueueId q = leaf; q != kNoId; q = tree.queue(q).parent) ++count[q];
      }
      while (count[kRootQueue] > 0) {
        QueueId q = kRootQueue;
        while (!tree.queue(q).leaf()) {
          QueueId best = kNoId;
          double best_ratio = 0;
          for (QueueId c : tree.queue(q).children) {
            if (count[c] == 0) continue;
            const double r = ratio(c);
            if (best == kNoId || r < best_ratio) {
              best = c;
              best_ratio = r;
            }
          }
          q = best;
        }
        const uint32_t i = jobs[q][head[q]++];
        out.push_back(i);
        const JobSpec& s = *snap.pending[i].spec;
        const Amounts a = amounts_of(s, s.min_members);
        for (QueueId u = q; u != kNoId; u = tree.queue(u).parent) {
          --count[u];
          for (size_t d = 0; d < kNumDims; ++d) eff[u][d] += static_cast<double>(a[d]);
        }
      }
      for (QueueId q = 0; q < n; ++q) {
        jobs[q].clear();
        head[q] = 0;
      }
      begin = end;
    }
    return out;
  }
};

}  // namespace

std::unique_ptr<QueueOrder> make_fair_order() {
  return std::make_unique<FairOrder>();
}
std::unique_ptr<QueueOrder> make_fifo_order() {
  return std::make_unique<FifoOrder>();
}
std::unique_ptr<QueueOrder> make_drf_order() {
  return std::make_unique<DrfOrder>();
}
std::unique_ptr<QueueOrder> make_las_order(std::vector<double> thresholds) {
  return std::make_unique<LasOrder>(std::move(thresholds));
}
std::unique_ptr<QueueOrder> make_sjf_order() {
  return std::make_unique<SjfOrder>();
}
std::unique_ptr<QueueOrder> make_qssf_order() {
  return std::make_unique<QssfOrder>();
}

std::unique_ptr<QueueOrder> make_queue_order(std::string_view name) {
  if (name == "fifo") return make_fifo_order();
  if (name == "drf") return make_drf_order();
  if (name == "las") return make_las_order();
  if (name == "sjf") return make_sjf_order();
  if (name == "fair") return make_fair_order();
  if (name == "qssf") return make_qssf_order();
  return nullptr;
}

std::vector<std::string> queue_order_names() {
  return {"fifo", "drf", "las", "sjf", "fair", "qssf"};
}

}  // namespace tessera
