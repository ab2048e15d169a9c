#include "engine/fair_share.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "engine/pending_queue.h"
#include "engine/running_set.h"

namespace tessera {

namespace {

// floor(a * b / c) without overflow for the magnitudes we see (milli-GPU x weights).
int64_t scaled(int64_t amount, double num, double den) {
  if (den <= 0) return 0;
  const double v = std::floor(static_cast<double>(amount) * (num / den));
  return v <= 0 ? 0 : static_cast<int64_t>(v);
}

// Splits `amount` of one dimension among `kids` of one parent. want[i]: what child i may
// take at most (min(demand, limit)); guar[i]: its guarantee; weight[i]: its weight.
std::vector<int64_t> split(int64_t amount, const std::vector<int64_t>& want,
                           const std::vector<int64_t>& guar, const std::vector<double>& weight) {
  const size_t n = want.size();
  std::vector<int64_t> got(n, 0);
  // Guarantees first (up to what each wants).
  int64_t g_total = 0;
  for (size_t i = 0; i < n; ++i) g_total += std::min(guar[i], want[i]);
  if (g_total > amount) {
    for (size_t i = 0; i < n; ++i) {
      got[i] = scaled(std::min(guar[i], want[i]), static_cast<double>(amount),
                      static_cast<double>(g_total));
    }
  } else {
    for (size_t i = 0; i < n; ++i) got[i] = std::min(guar[i], want[i]);
  }
  int64_t left = amount;
  for (int64_t g : got) left -= g;
  // Then by weight among those that want more, until nothing is left or nobody wants more.
  // `active` lists them in index order (a round passes over them only: with many queues and
  // few wanting more, a round costs those few).
  std::vector<uint32_t> active;
  for (size_t i = 0; i < n; ++i) {
    if (got[i] < want[i]) active.push_back(static_cast<uint32_t>(i));
  }
  while (left > 0 && !active.empty()) {
    double w_total = 0;
    for (uint32_t i : active) w_total += weight[i];
    if (w_total <= 0) break;
    int64_t given = 0;
    for (uint32_t i : active) {
      const int64_t x = std::min(want[i] - got[i], scaled(left, weight[i], w_total));
      got[i] += x;
      given += x;
    }
    if (given == 0) {
      // Less left than children wanting more (rounding): one unit each, by index.
      for (uint32_t i : active) {
        if (left - given <= 0) break;
        ++got[i];
        ++given;
      }
    }
    left -= given;
    std::erase_if(active, [&](uint32_t i) { return got[i] >= want[i]; });
  }
  return got;
}

void add_to_path(const QueueTree& tree, std::vector<Amounts>& v, QueueId leaf, const Amounts& a) {
  for (QueueId q = leaf; q != kNoId; q = tree.queue(q).parent) v[q] = v[q] + a;
}

}  // namespace

std::vector<Amounts> water_fill(const QueueTree& tree, const Amounts& capacity,
                                std::span<const Amounts> demand, std::span<const Amounts> decayed,
                                double long_term_weight) {
  const size_t n = tree.size();
  // Subtree long-term GPU usage, for the weight adjustment.
  std::vector<double> used(n, 0.0);
  const bool long_term = long_term_weight > 0 && !decayed.empty();
  if (long_term) {
    for (QueueId q = static_cast<QueueId>(n); q-- > 0;) {
      const QueueSpec& s = tree.queue(q);
      if (s.leaf() && q < decayed.size()) used[q] = static_cast<double>(decayed[q][kGpuDim]);
      if (q != kRootQueue) used[s.parent] += used[q];
    }
  }
  // Subtree demand: leaves as given, inner queues the sum of their children (children follow
  // their parents in id order, so a reverse pass sums bottom-up).
  std::vector<Amounts> want(n, kZeroAmounts);
  for (QueueId q = static_cast<QueueId>(n); q-- > 0;) {
    const QueueSpec& s = tree.queue(q);
    if (s.leaf() && q < demand.size()) want[q] = demand[q];
    if (q != kRootQueue) want[s.parent] = want[s.parent] + want[q];
  }
  std::vector<Amounts> ent(n, kZeroAmounts);
  for (size_t d = 0; d < kNumDims; ++d) ent[kRootQueue][d] = std::min(capacity[d], want[0][d]);
  for (QueueId q = 0; q < n; ++q) {
    const QueueSpec& s = tree.queue(q);
    if (s.leaf()) continue;
    const size_t k = s.children.size();
    std::vector<int64_t> w(k), g(k);
    std::vector<double> weight(k);
    double w_sum = 0, used_sum = 0;
    for (size_t i = 0; i < k; ++i) {
      weight[i] = tree.queue(s.children[i]).weight;
      w_sum += weight[i];
      used_sum += used[s.children[i]];
    }
    if (long_term && used_sum > 0) {
      for (size_t i = 0; i < k; ++i) {
        const double h = (used[s.children[i]] / used_sum) / (weight[i] / w_sum);
        weight[i] /= std::max(0.1, (1 - long_term_weight) + long_term_weight * h);
      }
    }
    for (size_t d = 0; d < kNumDims; ++d) {
      int64_t wanted = 0;
      bool weighed = true;  // every child that wants more than its guarantee has a weight
      for (size_t i = 0; i < k; ++i) {
        const QueueSpec& c = tree.queue(s.children[i]);
        w[i] = std::min(want[s.children[i]][d], c.limit[d]);
        g[i] = c.guarantee[d];
        wanted += w[i];
        weighed = weighed && (w[i] <= g[i] || weight[i] > 0);
      }
      if (wanted <= ent[q][d] && weighed) {
        // Room for what every child wants: split() would give each exactly that (its rounds
        // end only once every child has it), so skip them; most cycles of a cluster with
        // many queues and room to spare.
        for (size_t i = 0; i < k; ++i) ent[s.children[i]][d] = w[i];
        continue;
      }
      const std::vector<int64_t> got = split(ent[q][d], w, g, weight);
      for (size_t i = 0; i < k; ++i) ent[s.children[i]][d] = got[i];
    }
  }
  return ent;
}

double dominant_ratio(const Amounts& usage, const Amounts& entitled) {
  double r = 0;
  for (size_t d = 0; d < kNumDims; ++d) {
    if (usage[d] <= 0) continue;
    if (entitled[d] <= 0) return std::numeric_limits<double>::infinity();
    r = std::max(r, static_cast<double>(usage[d]) / static_cast<double>(entitled[d]));
  }
  return r;
}

Amounts amounts_of(const Allocation& a) {
  const int64_t m = a.members();
  return Amounts{a.gpu_milli(), a.cpu_milli_per_member * m, a.mem_mib_per_member * m};
}

Amounts cluster_capacity(const Cluster& c) {
  return Amounts{static_cast<int64_t>(c.num_gpus()) * kMilliPerGpu, c.total_cpu_milli(),
                 c.total_mem_mib()};
}

int64_t effective_gpu_milli(const Cluster& c, const JobSpec& job, const Allocation& a) {
  if (job.type_speed.empty()) return a.gpu_milli();
  double m = 0;
  for (const GpuShare& s : a.shares) {
    const GpuTypeId t = c.node(c.node_of_gpu(s.gpu)).gpu_type;
    const double speed = t < job.type_speed.size() && job.type_speed[t] > 0
                             ? static_cast<double>(job.type_speed[t])
                             : c.gpu_types().at(t).relative_speed;
    m += static_cast<double>(s.milli) * speed;
  }
  return std::llround(m);
}

Amounts fair_amounts_of(const FairnessSettings& fs, const Cluster& c, const JobSpec& job,
                        const Allocation& a) {
  Amounts amt = amounts_of(a);
  if (fs.count == FairCount::kThroughput) amt[kGpuDim] = effective_gpu_milli(c, job, a);
  return amt;
}

Amounts fair_capacity(const FairnessSettings& fs, const Cluster& c) {
  Amounts cap = cluster_capacity(c);
  if (fs.count == FairCount::kThroughput) {
    double m = 0;
    for (const Node& n : c.nodes()) {
      m += static_cast<double>(n.num_gpus) * kMilliPerGpu *
           c.gpu_types().at(n.gpu_type).relative_speed;
    }
    cap[kGpuDim] = std::llround(m);
  }
  return cap;
}

QueueId QueueShares::leaf_of(TenantId t) const {
  const QueueId q = tree->leaf_of(t);
  return q == kNoId ? kRootQueue : q;
}

bool has_limits(const QueueTree& tree) {
  for (const QueueSpec& q : tree.queues()) {
    if (!q.by_type.empty() || q.limit != kUnlimitedAmounts) return true;
  }
  return false;
}

QueueShares compute_queue_shares(const Snapshot& snap, SharesNeeded what) {
  QueueShares s;
  if (snap.queues != nullptr) {
    s.tree = snap.queues;
  } else {
    // One equal queue per tenant seen in the snapshot.
    TenantId max_tenant = 0;
    if (snap.pending_queue != nullptr) {
      const PendingQueue& q = *snap.pending_queue;
      for (TenantId t = 0; t < q.tenants(); ++t) {
        if (q.count(t) > 0) max_tenant = t;
      }
    } else {
      for (const PendingJob& p : snap.pending) max_tenant = std::max(max_tenant, p.spec->tenant);
    }
    if (snap.running_set != nullptr) {
      const RunningSet& rs = *snap.running_set;
      for (TenantId t = 0; t < rs.tenants(); ++t) {
        if (rs.count(t) > 0) max_tenant = std::max(max_tenant, t);
      }
    } else {
      for (const RunningJob& r : snap.running) max_tenant = std::max(max_tenant, r.spec->tenant);
    }
    Interner names;
    for (TenantId t = 0; t <= max_tenant; ++t) names.intern("tenant-" + std::to_string(t));
    s.owned = std::make_unique<QueueTree>(QueueTree::flat(names));
    s.tree = s.owned.get();
  }
  const QueueTree& tree = *s.tree;
  const size_t n = tree.size();
  s.usage.assign(n, kZeroAmounts);
  s.demand.assign(n, kZeroAmounts);
  if (what == SharesNeeded::kTreeOnly) {
    s.entitled.assign(n, kZeroAmounts);
    return s;
  }
  // Usage and demand are summed up each path (water_fill reads only the leaves' demand).
  const Cluster& cluster = snap.state->cluster();
  const RunningSet* rs = snap.running_set;
  if (rs != nullptr && &rs->cluster() == &cluster && rs->fair_count() == tree.settings().count) {
    // The caller keeps each tenant's usage: a pass per tenant, not per running job.
    for (TenantId t = 0; t < rs->tenants(); ++t) {
      if (rs->count(t) == 0) continue;
      const QueueId leaf = s.leaf_of(t);
      add_to_path(tree, s.usage, leaf, rs->usage(t));
      add_to_path(tree, s.demand, leaf, rs->demand(t));
    }
  } else {
    for (const RunningJob& r : snap.running) {
      const QueueId leaf = s.leaf_of(r.spec->tenant);
      const Amounts a = fair_amounts_of(tree.settings(), cluster, *r.spec, *r.alloc);
      add_to_path(tree, s.usage, leaf, a);
      if (r.spec->priority != PriorityClass::kBestEffort) add_to_path(tree, s.demand, leaf, a);
    }
  }
  if (snap.pending_queue != nullptr) {
    // The queue keeps each tenant's pending demand: a pass per tenant, not per job.
    const PendingQueue& q = *snap.pending_queue;
    for (TenantId t = 0; t < q.tenants(); ++t) {
      if (q.count(t) > 0) add_to_path(tree, s.demand, s.leaf_of(t), q.demand(t));
    }
  } else {
    for (const PendingJob& p : snap.pending) {
      if (p.spec->priority == PriorityClass::kBestEffort) continue;
      add_to_path(tree, s.demand, s.leaf_of(p.spec->tenant),
                  amounts_of(*p.spec, p.spec->min_members));
    }
  }
  s.entitled = water_fill(tree, fair_capacity(tree.settings(), cluster), s.demand,
                          snap.decayed_usage, tree.settings().long_term_weight);
  return s;
}

}  // namespace tessera
