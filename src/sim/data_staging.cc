#include "sim/data_staging.h"

#include <algorithm>
#include <limits>
#include <map>

namespace tessera {

DataStaging::DataStaging(const Cluster& c, CacheEviction eviction)
    : c_(c),
      s_(c.storage()),
      eviction_(eviction),
      nvme_(c.nodes().size()),
      cache_(s_.cache_per_rack ? std::max<size_t>(1, c.racks().size()) : 1),
      home_(c.nodes().size(), -1) {}

DataStaging::Copy* DataStaging::find(Tier& tier, uint32_t d) {
  for (Copy& c : tier) {
    if (c.d == d) return &c;
  }
  return nullptr;
}

const DataStaging::Copy* DataStaging::find(const Tier& tier, uint32_t d) const {
  for (const Copy& c : tier) {
    if (c.d == d) return &c;
  }
  return nullptr;
}

size_t DataStaging::cache_of(NodeId n) const {
  return s_.cache_per_rack ? std::min<size_t>(c_.node(n).rack, cache_.size() - 1) : 0;
}

void DataStaging::read_out(uint32_t d, double t) {
  if (first_read_.size() <= d) {
    first_read_.resize(d + 1, std::numeric_limits<double>::infinity());
  }
  first_read_[d] = std::min(first_read_[d], t);
}

double DataStaging::first_read(uint32_t d) const {
  return d < first_read_.size() ? first_read_[d] : std::numeric_limits<double>::infinity();
}

bool DataStaging::make_room(Tier& tier, double capacity, double gb, double t, int64_t keep) {
  if (gb > capacity) return false;
  double used = 0;
  for (const Copy& c : tier) used += c.gb;
  while (used + gb > capacity + 1e-9) {
    // The victim: not read by a running job nor being written; by the policy, then oldest use.
    size_t victim = tier.size();
    const auto unwanted = [&](const Copy& c) {
      return eviction_ == CacheEviction::kQueueAware &&
             (c.d >= wanted_.size() || wanted_[c.d] == 0);
    };
    for (size_t i = 0; i < tier.size(); ++i) {
      const Copy& c = tier[i];
      if (c.in_use > 0 || c.ready_at > t || static_cast<int64_t>(c.d) == keep) continue;
      if (victim == tier.size()) {
        victim = i;
        continue;
      }
      const Copy& v = tier[victim];
      if (unwanted(c) != unwanted(v) ? unwanted(c) : c.last_used < v.last_used) victim = i;
    }
    if (victim == tier.size()) return false;
    used -= tier[victim].gb;
    tier.erase(tier.begin() + static_cast<std::ptrdiff_t>(victim));
  }
  return true;
}

double DataStaging::object_transfer(double gb, double t, double cap, bool prestaging) {
  std::erase_if(object_until_, [&](double e) { return e <= t; });
  std::erase_if(prestage_until_, [&](double e) { return e <= t; });
  const double active = static_cast<double>(object_until_.size() + prestage_until_.size() + 1);
  const double gbs = std::min(cap, s_.object_gbs / active);
  const double secs = gb / gbs;
  (prestaging ? prestage_until_ : object_until_).push_back(t + secs);
  stats_.object_gb += gb;
  return secs;
}

double DataStaging::start(uint32_t d, const Dataset& ds, const Allocation& a, double t, double gpus,
                          bool unqueued) {
  ++stats_.starts;
  const std::vector<NodeId> nodes = a.nodes();
  const double gb = ds.size_gb;
  double ready_all = t;
  // When the dataset is in each cache for this start (one object transfer fills a cache; the
  // run's other nodes behind it read it from there as it arrives).
  std::map<size_t, double> filling;
  for (const NodeId n : nodes) {
    ++stats_.node_reads;
    if (s_.nvme_gb <= 0 || gb > s_.nvme_gb) {
      ++stats_.streamed;  // read where it is, at stream_factor()
      continue;
    }
    if (Copy* have = find(nvme_[n], d)) {
      ++stats_.nvme_hits;
      have->last_used = t;
      ++have->in_use;
      ready_all = std::max(ready_all, have->ready_at);
      continue;
    }
    double ready = t;
    const bool cached = s_.cache_gb > 0 && gb <= s_.cache_gb;
    const size_t k = cache_of(n);
    Copy* in_cache = cached ? find(cache_[k], d) : nullptr;
    if (in_cache != nullptr) {
      ++stats_.cache_hits;
      in_cache->last_used = t;
      ready = std::max(t, in_cache->ready_at) + gb / s_.cache_gbs;
      stats_.cache_gb += gb;
    } else if (cached && filling.count(k) != 0) {
      ++stats_.cache_hits;
      ready = filling[k];
      stats_.cache_gb += gb;
    } else {
      ++stats_.object_reads;
      read_out(d, t);
      ready = t + object_transfer(gb, t, s_.per_job_gbs, false);
      if (cached && make_room(cache_[k], s_.cache_gb, gb, t)) {
        cache_[k].push_back(Copy{d, gb, ready, t, 0, false});
        filling[k] = ready;
      }
    }
    if (make_room(nvme_[n], s_.nvme_gb, gb, t, home_[n])) {
      nvme_[n].push_back(Copy{d, gb, ready, t, 1, false});
    }
    ready_all = std::max(ready_all, ready);
  }
  const double wait = ready_all - t;
  stats_.staging_seconds += wait;
  stats_.staging_gpu_seconds += wait * gpus;
  if (unqueued) {
    stats_.unqueued_staging_gpu_seconds += wait * gpus;
    // Its dataset first read in this event: a cold start nothing could have foreseen.
    if (first_read(d) >= t - 1e-9) stats_.cold_staging_gpu_seconds += wait * gpus;
  }
  return wait;
}

void DataStaging::release(uint32_t d, const Allocation& a) {
  for (const NodeId n : a.nodes()) {
    if (Copy* c = find(nvme_[n], d); c != nullptr && c->in_use > 0) --c->in_use;
  }
}

DataStaging::Source DataStaging::read_source(const Dataset& ds) const {
  if (s_.nvme_gb > 0 && ds.size_gb <= s_.nvme_gb) return Source::kLocal;
  if (s_.cache_gb > 0 && ds.size_gb <= s_.cache_gb) return Source::kCache;
  return Source::kObject;
}

double DataStaging::stream_factor(const Dataset& ds, int gpus) const {
  const double need = need_gbs(ds, gpus);
  if (need <= 0) return 1;
  switch (read_source(ds)) {
    case Source::kLocal:
      return 1;
    case Source::kCache:
      return std::min(1.0, s_.cache_gbs / need);
    case Source::kObject:
      return std::min(1.0, std::min(s_.per_job_gbs, s_.object_gbs) / need);
  }
  return 1;
}

std::vector<double> DataStaging::object_shares(const std::vector<double>& needs) const {
  std::vector<size_t> order(needs.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return needs[a] < needs[b]; });
  std::vector<double> out(needs.size(), 0);
  double left = s_.object_gbs;
  for (size_t k = 0; k < order.size(); ++k) {
    const size_t i = order[k];
    const double fair = left / static_cast<double>(order.size() - k);
    out[i] = std::min({needs[i], s_.per_job_gbs, fair});
    left -= out[i];
  }
  return out;
}

bool DataStaging::on_node(uint32_t d, NodeId n) const {
  return find(nvme_[n], d) != nullptr;
}

std::shared_ptr<const NodeSet> DataStaging::nodes_with(uint32_t d) const {
  std::vector<NodeId> have;
  for (NodeId n = 0; n < nvme_.size(); ++n) {
    if (find(nvme_[n], d) != nullptr) have.push_back(n);
  }
  if (have.empty()) return nullptr;
  return std::make_shared<const NodeSet>(have);
}

int DataStaging::prestaging(double t) const {
  return static_cast<int>(std::count_if(prestage_until_.begin(), prestage_until_.end(),
                                        [&](double e) { return e > t; }));
}

double DataStaging::next_prestage_done(double t) const {
  double next = std::numeric_limits<double>::infinity();
  for (const double e : prestage_until_) {
    if (e > t) next = std::min(next, e);
  }
  return next;
}

bool DataStaging::prestage(uint32_t d, const Dataset& ds, NodeId n, double t, double gbs) {
  const double gb = ds.size_gb;
  if (s_.nvme_gb <= 0 || gb > s_.nvme_gb || find(nvme_[n], d) != nullptr) return false;
  if (!make_room(nvme_[n], s_.nvme_gb, gb, t, home_[n])) return false;
  double ready = t;
  const bool cached = s_.cache_gb > 0 && gb <= s_.cache_gb;
  const size_t k = cache_of(n);
  if (Copy* in_cache = cached ? find(cache_[k], d) : nullptr) {
    in_cache->last_used = t;
    ready = std::max(t, in_cache->ready_at) + gb / s_.cache_gbs;
    stats_.cache_gb += gb;
  } else {
    read_out(d, t);
    ready = t + object_transfer(gb, t, std::min(gbs, s_.per_job_gbs), true);
    if (cached && make_room(cache_[k], s_.cache_gb, gb, t)) {
      cache_[k].push_back(Copy{d, gb, ready, t, 0, true});
    }
  }
  stats_.prestaged_gb += gb;
  nvme_[n].push_back(Copy{d, gb, ready, t, 0, true});
  return true;
}

}  // namespace tessera
