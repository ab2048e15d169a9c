#include "engine/queue_order.h"

#include <algorithm>
#include <array>
#include <functional>
#include <limits>
#include <queue>
#include <tuple>

namespace tessera {

int64_t QueueOrder::rank(const JobSpec& job, double) const {
  return static_cast<int64_t>(job.priority);
}

PendingKey QueueOrder::pending_key(const PendingJob& p) const {
  return PendingKey{-static_cast<int>(p.spec->priority), order_key(p), p.spec->submit_time, p.id};
}

namespace {

// Per tenant, its pending jobs in pending_key order: what every walk reads. A preempted job is
// ranked by its submit time, not the time it was requeued: it keeps its place ahead of the equal
// jobs that came after it, so neither the order nor the reservation made
// for the first blocked job can invert arrival within a queue.
class Source {
 public:
  virtual ~Source() = default;
  virtual TenantId tenants() const = 0;  // tenant ids are below this
  virtual bool done(TenantId t) const = 0;
  virtual const PendingKey& head(TenantId t) const = 0;
  virtual uint32_t head_index(TenantId t) const = 0;  // into Snapshot::pending
  virtual void advance(TenantId t) = 0;
  // Whether pass_over() and seek() may be called: the source reads a PendingQueue's streams.
  virtual bool can_pass_over() const { return false; }
  // Moves t's head to its first job from the head on that `rule` keeps (done when none),
  // returning the summed amounts of the jobs passed over.
  virtual Amounts pass_over(TenantId, const PassOver&) { return kZeroAmounts; }
  // Moves t's head, back or forth, to its first job for which after(job, amounts of the jobs
  // ahead of it) holds (done when none), given that it holds for every job after one it holds
  // for; returns the amounts of the jobs ahead of the new head (of all, when done).
  using After = std::function<bool(const StreamEntry&, const Amounts&)>;
  virtual Amounts seek(TenantId, const After&) { return kZeroAmounts; }
};

// From a plain snapshot: each tenant's jobs sorted once (O(n) when the caller keeps them in
// arrival order, as serve and the Kubernetes scheduler do).
class SpanSource final : public Source {
 public:
  // One sequence per tenant for the orders that interleave tenants, else one for all.
  SpanSource(const Snapshot& snap, const QueueOrder& order) {
    const bool per_tenant = order.interleave() != QueueOrder::Interleave::kByKey;
    if (!per_tenant) seq_.resize(1);
    for (uint32_t i = 0; i < snap.pending.size(); ++i) {
      const PendingJob& p = snap.pending[i];
      const TenantId t = per_tenant ? p.spec->tenant : 0;
      if (t >= seq_.size()) seq_.resize(t + 1);
      seq_[t].emplace_back(order.pending_key(p), i);
    }
    for (auto& s : seq_) {
      if (!std::is_sorted(s.begin(), s.end())) std::sort(s.begin(), s.end());
    }
    pos_.assign(seq_.size(), 0);
  }
  TenantId tenants() const override { return static_cast<TenantId>(seq_.size()); }
  bool done(TenantId t) const override { return pos_[t] >= seq_[t].size(); }
  const PendingKey& head(TenantId t) const override { return seq_[t][pos_[t]].first; }
  uint32_t head_index(TenantId t) const override { return seq_[t][pos_[t]].second; }
  void advance(TenantId t) override { ++pos_[t]; }

 private:
  std::vector<std::vector<std::pair<PendingKey, uint32_t>>> seq_;
  std::vector<size_t> pos_;
};

// From the caller's PendingQueue: nothing is sorted or copied; a step is a set iterator's. Its
// streams are per tenant for the orders that interleave tenants (the queue is kept for this
// order, source_for), else one.
class QueueSource final : public Source {
 public:
  explicit QueueSource(const PendingQueue& q) : streams_(q.streams()) {
    for (const PendingQueue::Stream& s : q.streams()) it_.emplace_back(s.begin(), s.end());
  }
  TenantId tenants() const override { return static_cast<TenantId>(it_.size()); }
  bool done(TenantId t) const override { return it_[t].first == it_[t].second; }
  const PendingKey& head(TenantId t) const override { return it_[t].first->key; }
  uint32_t head_index(TenantId t) const override { return it_[t].first->index; }
  void advance(TenantId t) override { ++it_[t].first; }
  bool can_pass_over() const override { return true; }
  // O(log n) by the stream's sums, however many jobs it passes over.
  Amounts pass_over(TenantId t, const PassOver& rule) override {
    auto& [it, end] = it_[t];
    if (it == end || rule.keeps(*it)) return kZeroAmounts;
    const PendingQueue::Stream& s = streams_[t];
    const Amounts before = s.amounts_before(it->key);
    const StreamEntry* kept = s.first_kept(it->key, rule);
    if (kept == nullptr) {
      it = end;
      return s.node_begin().get_metadata().amounts - before;  // the root's sums: every job
    }
    it = s.find(*kept);
    return s.amounts_before(kept->key) - before;
  }
  // O(log n) by the stream's sums.
  Amounts seek(TenantId t, const After& after) override {
    auto& [it, end] = it_[t];
    const PendingQueue::Stream& s = streams_[t];
    Amounts ahead = kZeroAmounts;
    const StreamEntry* e = s.first_where(after, ahead);
    it = e == nullptr ? end : s.find(*e);
    return ahead;
  }

 private:
  std::span<const PendingQueue::Stream> streams_;
  std::vector<std::pair<PendingQueue::Stream::const_iterator, PendingQueue::Stream::const_iterator>>
      it_;
};

std::unique_ptr<Source> source_for(const Snapshot& snap, const QueueOrder& order) {
  // A queue kept for another order has other keys: sort the span instead.
  if (snap.pending_queue != nullptr && &snap.pending_queue->order() == &order) {
    return std::make_unique<QueueSource>(*snap.pending_queue);
  }
  return std::make_unique<SpanSource>(snap, order);
}

// One order across tenants: a merge of their sequences by key (or the one sequence).
class KeyWalk final : public PendingWalk {
 public:
  explicit KeyWalk(std::unique_ptr<Source> src) : src_(std::move(src)) {
    if (src_->tenants() != 1) {
      for (TenantId t = 0; t < src_->tenants(); ++t) push(t);
    }
  }
  int64_t next() override {
    if (src_->tenants() == 1) {  // one sequence: no merge
      if (src_->done(0)) return -1;
      const uint32_t i = src_->head_index(0);
      src_->advance(0);
      return i;
    }
    if (heap_.empty()) return -1;
    const TenantId t = heap_.top().second;
    heap_.pop();
    const uint32_t i = src_->head_index(t);
    src_->advance(t);
    push(t);
    return i;
  }

 private:
  void push(TenantId t) {
    if (!src_->done(t)) heap_.emplace(src_->head(t), t);
  }
  std::unique_ptr<Source> src_;
  using Entry = std::pair<PendingKey, TenantId>;
  std::priority_queue<Entry, std::vector<Entry>, std::greater<>> heap_;
};

class FifoOrder final : public QueueOrder {
 public:
  std::string_view name() const override { return "fifo"; }
};

class SjfOrder final : public QueueOrder {
 public:
  std::string_view name() const override { return "sjf"; }
  double order_key(const PendingJob& p) const override {
    const double est = p.spec->duration_estimate;
    return est >= 0 ? est : std::numeric_limits<double>::infinity();
  }
};

// Helios' Quasi-Shortest-Service-First (Hu et al., SC'21): the smallest predicted GPU service
// (GPUs of the gang x duration estimate) first; unknown estimates last.
class QssfOrder final : public QueueOrder {
 public:
  std::string_view name() const override { return "qssf"; }
  double order_key(const PendingJob& p) const override {
    const JobSpec& s = *p.spec;
    const double est = s.duration_estimate;
    if (est < 0) return std::numeric_limits<double>::infinity();
    return static_cast<double>(s.gpu_milli_per_gang(s.min_members)) / kMilliPerGpu * est;
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
  double order_key(const PendingJob& p) const override {
    return static_cast<double>(level(p.attained_gpu_seconds));
  }
  int64_t rank(const JobSpec& job, double attained) const override {
    // Priority class dominates; within a class a lower queue outranks a higher one.
    return static_cast<int64_t>(job.priority) * 1024 - level(attained);
  }

 private:
  std::vector<double> thresholds_;
};

// Weighted DRF: progressive filling, repeatedly the head of the tenant with the lowest weighted
// dominant share, assuming it starts (at its maximum size). Ties break by tenant id.
class DrfWalk final : public PendingWalk {
 public:
  DrfWalk(std::unique_ptr<Source> src, const Snapshot& snap, const QueueShares& shares)
      : src_(std::move(src)), snap_(snap), shares_(shares) {
    // GPUs are the dominant resource of every GPU job we model; CPU and memory shares are
    // counted too so CPU-only pods are ordered fairly.
    const Cluster& c = snap.state->cluster();
    total_gpu_ = static_cast<double>(c.num_gpus()) * kMilliPerGpu;
    for (const Node& n : c.nodes()) {
      total_cpu_ += static_cast<double>(n.cpu_milli);
      total_mem_ += static_cast<double>(n.mem_mib);
    }
    usage_.resize(src_->tenants());
    for (const RunningJob& r : snap.running) {
      if (r.spec->tenant >= usage_.size()) usage_.resize(r.spec->tenant + 1);
      Usage& u = usage_[r.spec->tenant];
      u.gpu += static_cast<double>(r.alloc->gpu_milli());
      u.cpu += static_cast<double>(r.alloc->cpu_milli_per_member * r.alloc->members());
      u.mem += static_cast<double>(r.alloc->mem_mib_per_member * r.alloc->members());
    }
    for (TenantId t = 0; t < src_->tenants(); ++t) push(t);
  }
  int64_t next() override {
    while (!heap_.empty() && dropped(std::get<2>(heap_.top()))) heap_.pop();
    if (heap_.empty()) return -1;
    const TenantId t = std::get<2>(heap_.top());
    heap_.pop();
    const uint32_t i = src_->head_index(t);
    src_->advance(t);
    const JobSpec& s = *snap_.pending[i].spec;
    usage_[t].gpu += static_cast<double>(s.gpu_milli_per_gang(s.max_members));
    usage_[t].cpu += static_cast<double>(s.demand.cpu_milli * s.max_members);
    usage_[t].mem += static_cast<double>(s.demand.mem_mib * s.max_members);
    push(t);
    return i;
  }

  // A tenant's dominant share grows with its own jobs only: leaving one out changes nothing
  // for the others.
  bool drop_tenant(TenantId t) override {
    if (t >= dropped_.size()) dropped_.resize(t + 1, false);
    dropped_[t] = true;
    return true;
  }

 private:
  bool dropped(TenantId t) const { return t < dropped_.size() && dropped_[t]; }
  struct Usage {
    double gpu = 0, cpu = 0, mem = 0;
  };
  void push(TenantId t) {
    if (src_->done(t)) return;
    const Usage& u = usage_[t];
    const double dominant = std::max({total_gpu_ > 0 ? u.gpu / total_gpu_ : 0.0,
                                      total_cpu_ > 0 ? u.cpu / total_cpu_ : 0.0,
                                      total_mem_ > 0 ? u.mem / total_mem_ : 0.0});
    const double share = dominant / shares_.tree->queue(shares_.leaf_of(t)).weight;
    heap_.emplace(src_->head(t).neg_priority, share, t);
  }
  std::unique_ptr<Source> src_;
  const Snapshot& snap_;
  const QueueShares& shares_;
  double total_gpu_ = 0, total_cpu_ = 0, total_mem_ = 0;
  std::vector<Usage> usage_;                        // by TenantId
  std::vector<bool> dropped_;                       // by TenantId
  using Entry = std::tuple<int, double, TenantId>;  // (-priority of head, share, tenant)
  std::priority_queue<Entry, std::vector<Entry>, std::greater<>> heap_;
};

// Hierarchical fair share: one priority class at a time (every class outranks the fairness
// between queues); within it, progressive filling down the tree, at each level the child whose
// usage (grown as jobs are assumed to start) is the smallest fraction of its entitlement;
// within a leaf, the pending_key order. A step costs O(tenants + queues), and, while the cycle
// has it pass over jobs that cannot start (pass_over), O(log n) more per leaf that moved on.
class FairWalk final : public PendingWalk {
 public:
  // `queue`: the PendingQueue src reads, if it does (order_subset needs its sums).
  FairWalk(std::unique_ptr<Source> src, const Snapshot& snap, const QueueShares& sh,
           const PendingQueue* queue)
      : src_(std::move(src)), snap_(snap), sh_(sh), tree_(*sh.tree), queue_(queue) {
    const size_t n = tree_.size();
    eff_.resize(n);
    for (QueueId q = 0; q < n; ++q) {
      for (size_t d = 0; d < kNumDims; ++d) eff_[q][d] = static_cast<double>(sh.usage[q][d]);
    }
    tenants_of_.resize(n);
    for (TenantId t = 0; t < src_->tenants(); ++t) {
      if (!src_->done(t)) tenants_of_[sh.leaf_of(t)].push_back(t);
    }
    for (QueueId q = 0; q < n; ++q) {
      if (!tenants_of_[q].empty()) leaves_.push_back(q);
    }
    marked_.assign(n, false);
    const auto& children = tree_.queue(kRootQueue).children;
    flat_ = src_->can_pass_over() && tenants_of_[kRootQueue].empty();
    child_pos_.assign(n, 0);
    for (size_t k = 0; k < children.size(); ++k) {
      child_pos_[children[k]] = k;
      flat_ = flat_ && tree_.queue(children[k]).leaf() && tenants_of_[children[k]].size() <= 1;
    }
    rules_.resize(n);
    unchecked_.assign(n, false);
  }

  // In a flat tree whose leaves hold one tenant each, a leaf is a sequence of its jobs in key
  // order, each placed among the root's children by the leaf's usage plus the amounts of every
  // job ahead of it (order_subset): leaving some out while adding their amounts to the leaf's
  // usage keeps the place, so the order, of the rest. A leaf's head is checked against its
  // rule before each step; a leaf whose rule keeps a job its last one did not goes back to its
  // first job after the last one given (seek, by the same places).
  bool pass_over(std::span<const PassOver> rule) override {
    if (!flat_) return false;
    for (QueueId q : leaves_) {
      const PassOver& r = rule[tenants_of_[q].front()];
      if (passing_ && r == rules_[q]) continue;
      if (passing_ && !rules_[q].keeps_all_of(r)) go_back(q);
      rules_[q] = r;
      unchecked_[q] = true;
    }
    passing_ = true;
    return true;
  }

  // A leaf whose parent is the root, once every tenant of it is dropped: the progressive
  // filling among its siblings reads only their own usage, so their order is unchanged. (Below
  // an inner queue the leaf's jobs grow the parent's usage, which orders the parent.)
  bool drop_tenant(TenantId t) override {
    if (t >= dropped_.size()) dropped_.resize(t + 1, false);
    dropped_[t] = true;
    const QueueId leaf = sh_.leaf_of(t);
    if (leaf == kRootQueue || tree_.queue(leaf).parent != kRootQueue) return false;
    for (TenantId u : tenants_of_[leaf]) {
      if (u >= dropped_.size() || !dropped_[u]) return false;
    }
    std::erase(leaves_, leaf);
    return true;
  }

  // In a flat tree the walk merges the leaves' sequences by the ratio each job's leaf has when
  // it is taken (non-decreasing along a leaf), ties to the earlier child: a job's place is
  // (class, that ratio, its leaf among the root's children, its key), and the ratio is the
  // leaf's usage plus the amounts of every job ahead of it in the leaf, summed by the queue.
  bool order_subset(std::vector<uint32_t>& idx) const override {
    if (queue_ == nullptr || !queue_->per_tenant()) return false;
    const auto& children = tree_.queue(kRootQueue).children;
    for (QueueId q : children) {
      if (!tree_.queue(q).leaf()) return false;
    }
    using Place = std::tuple<int, double, size_t, PendingKey, uint32_t>;
    std::vector<Place> places;
    places.reserve(idx.size());
    for (uint32_t i : idx) {
      const PendingJob& p = snap_.pending[i];
      const PendingKey key = queue_->order().pending_key(p);
      const QueueId leaf = sh_.leaf_of(p.spec->tenant);
      const auto pos = std::find(children.begin(), children.end(), leaf);
      if (pos == children.end()) return false;
      Amounts ahead = kZeroAmounts;
      for (TenantId u : tenants_of_[leaf]) {
        ahead = ahead + queue_->streams()[u].amounts_before(key);
      }
      std::array<double, kNumDims> eff{};
      for (size_t d = 0; d < kNumDims; ++d) {
        eff[d] = static_cast<double>(sh_.usage[leaf][d]) + static_cast<double>(ahead[d]);
      }
      places.emplace_back(key.neg_priority, ratio(leaf, eff),
                          static_cast<size_t>(pos - children.begin()), key, i);
    }
    std::sort(places.begin(), places.end());
    for (size_t k = 0; k < places.size(); ++k) idx[k] = std::get<4>(places[k]);
    return true;
  }

  int64_t next() override {
    if (passing_) pass_over_heads();
    // The class being filled: the highest among the queues' next jobs.
    int tier = std::numeric_limits<int>::max();
    for (QueueId q : leaves_) {
      const TenantId t = head_tenant(q);
      if (t != kNoTenant) tier = std::min(tier, src_->head(t).neg_priority);
    }
    if (tier == std::numeric_limits<int>::max()) return -1;
    std::fill(marked_.begin(), marked_.end(), false);
    for (QueueId q : leaves_) {
      const TenantId t = head_tenant(q);
      if (t == kNoTenant || src_->head(t).neg_priority != tier) continue;
      for (QueueId a = q; a != kNoId && !marked_[a]; a = tree_.queue(a).parent) marked_[a] = true;
    }
    QueueId q = kRootQueue;
    double root_ratio = 0;  // of the root's child chosen
    while (!tree_.queue(q).leaf()) {
      QueueId best = kNoId;
      double best_ratio = 0;
      for (QueueId c : tree_.queue(q).children) {
        if (!marked_[c]) continue;
        const double r = ratio(c, eff_[c]);
        if (best == kNoId || r < best_ratio) {
          best = c;
          best_ratio = r;
        }
      }
      if (best == kNoId) break;  // jobs of a tenant bound to this inner queue itself
      if (q == kRootQueue) root_ratio = best_ratio;
      q = best;
    }
    const TenantId t = head_tenant(q);
    const uint32_t i = src_->head_index(t);
    if (flat_) last_ = LastPlace{true, tier, root_ratio, child_pos_[q], q, src_->head(t)};
    src_->advance(t);
    unchecked_[q] = passing_;
    const JobSpec& s = *snap_.pending[i].spec;
    take(q, amounts_of(s, s.min_members));
    return i;
  }

 private:
  // Grows the usage of q and its ancestors by `a`, as if those jobs started.
  void take(QueueId q, const Amounts& a) {
    for (QueueId u = q; u != kNoId; u = tree_.queue(u).parent) {
      for (size_t d = 0; d < kNumDims; ++d) eff_[u][d] += static_cast<double>(a[d]);
    }
  }
  // Moves each unchecked leaf's head past the jobs its rule does not keep, taking their
  // amounts. (Integer-valued doubles below 2^53 sum exactly: adding the amounts at once
  // gives the usage adding them one by one would.)
  void pass_over_heads() {
    for (QueueId q : leaves_) {
      if (!unchecked_[q]) continue;
      unchecked_[q] = false;
      const TenantId t = tenants_of_[q].front();
      if (!src_->done(t)) take(q, src_->pass_over(t, rules_[q]));
    }
  }
  // Puts leaf q's head at its first job after the last job given (flat_), with the usage the
  // leaf has there: its own plus the amounts of every job ahead of that one.
  void go_back(QueueId q) {
    const LastPlace last = last_;
    const std::vector<Amounts>& usage = sh_.usage;
    auto after = [this, q, last, &usage](const StreamEntry& e, const Amounts& ahead) {
      if (!last.any) return true;
      if (q == last.leaf) return last.key < e.key;
      std::array<double, kNumDims> eff{};
      for (size_t d = 0; d < kNumDims; ++d) {
        eff[d] = static_cast<double>(usage[q][d]) + static_cast<double>(ahead[d]);
      }
      return std::make_tuple(e.key.neg_priority, ratio(q, eff), child_pos_[q]) >
             std::make_tuple(last.tier, last.ratio, last.pos);
    };
    const Amounts ahead = src_->seek(tenants_of_[q].front(), after);
    for (size_t d = 0; d < kNumDims; ++d) {
      const double now = static_cast<double>(usage[q][d]) + static_cast<double>(ahead[d]);
      eff_[kRootQueue][d] += now - eff_[q][d];
      eff_[q][d] = now;
    }
  }
  static constexpr TenantId kNoTenant = std::numeric_limits<TenantId>::max();
  // The tenant of queue q whose next job comes first (a leaf usually has one tenant).
  TenantId head_tenant(QueueId q) const {
    TenantId best = kNoTenant;
    for (TenantId t : tenants_of_[q]) {
      if (!src_->done(t) && (best == kNoTenant || src_->head(t) < src_->head(best))) best = t;
    }
    return best;
  }
  double ratio(QueueId q, const std::array<double, kNumDims>& eff) const {
    double r = 0;
    for (size_t d = 0; d < kNumDims; ++d) {
      if (eff[d] <= 0) continue;
      if (sh_.entitled[q][d] <= 0) return std::numeric_limits<double>::infinity();
      r = std::max(r, eff[d] / static_cast<double>(sh_.entitled[q][d]));
    }
    return r;
  }
  std::unique_ptr<Source> src_;
  const Snapshot& snap_;
  const QueueShares& sh_;
  const QueueTree& tree_;
  const PendingQueue* queue_;
  std::vector<std::array<double, kNumDims>> eff_;  // by QueueId: usage, grown as jobs are taken
  std::vector<std::vector<TenantId>> tenants_of_;  // by QueueId: the tenants bound to it
  std::vector<QueueId> leaves_;                    // queues with tenants that have jobs
  std::vector<bool> marked_;   // per step: the subtree has a next job of the class being filled
  std::vector<bool> dropped_;  // by TenantId (drop_tenant)
  // pass_over: whether it applies (a flat tree, leaves of one tenant, read from a
  // PendingQueue), whether a rule was given, each leaf's rule and whether its head was checked
  // against it (not since the rule changed or the leaf moved on).
  bool flat_ = false;
  bool passing_ = false;
  std::vector<PassOver> rules_;    // by QueueId
  std::vector<bool> unchecked_;    // by QueueId
  std::vector<size_t> child_pos_;  // by QueueId: its place among the root's children
  // The place (order_subset) of the last job given, where flat_.
  struct LastPlace {
    bool any = false;
    int tier = 0;
    double ratio = 0;  // its leaf's when it was taken
    size_t pos = 0;    // child_pos_ of its leaf
    QueueId leaf = kNoId;
    PendingKey key;
  };
  LastPlace last_;
};

class DrfOrder final : public QueueOrder {
 public:
  std::string_view name() const override { return "drf"; }
  Interleave interleave() const override { return Interleave::kDominantShare; }
};

class FairOrder final : public QueueOrder {
 public:
  std::string_view name() const override { return "fair"; }
  bool reads_shares() const override { return true; }
  Interleave interleave() const override { return Interleave::kQueueTree; }
  // Earliest SLA deadline first (submit + max queueing delay; jobs without one after).
  double order_key(const PendingJob& p) const override {
    const double sla = p.spec->sla_max_queueing;
    return sla >= 0 ? p.spec->submit_time + sla : std::numeric_limits<double>::infinity();
  }
};

}  // namespace

std::unique_ptr<PendingWalk> QueueOrder::walk(const Snapshot& snap,
                                              const QueueShares& shares) const {
  const bool own_queue = snap.pending_queue != nullptr && &snap.pending_queue->order() == this;
  std::unique_ptr<Source> src = source_for(snap, *this);
  switch (interleave()) {
    case Interleave::kDominantShare:
      return std::make_unique<DrfWalk>(std::move(src), snap, shares);
    case Interleave::kQueueTree:
      return std::make_unique<FairWalk>(std::move(src), snap, shares,
                                        own_queue ? snap.pending_queue : nullptr);
    case Interleave::kByKey:
      break;
  }
  return std::make_unique<KeyWalk>(std::move(src));
}

std::vector<uint32_t> QueueOrder::order(const Snapshot& snap, const QueueShares& shares) const {
  std::vector<uint32_t> out;
  out.reserve(snap.pending.size());
  const auto w = walk(snap, shares);
  for (int64_t i = w->next(); i >= 0; i = w->next()) out.push_back(static_cast<uint32_t>(i));
  return out;
}

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
