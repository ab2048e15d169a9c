#include "engine/stages/elastic_stage.h"

#include <algorithm>
#include <tuple>

namespace tessera {

namespace {

// Members [begin, end) of an allocation, as an allocation of their own.
Allocation members_of(const Allocation& a, int32_t begin, int32_t end) {
  Allocation out;
  out.gpus_per_member = a.gpus_per_member;
  out.cpu_milli_per_member = a.cpu_milli_per_member;
  out.mem_mib_per_member = a.mem_mib_per_member;
  const auto g = static_cast<size_t>(a.gpus_per_member);
  for (int32_t m = begin; m < end; ++m) {
    out.member_node.push_back(a.member_node[static_cast<size_t>(m)]);
    out.shares.insert(out.shares.end(), a.shares.begin() + static_cast<std::ptrdiff_t>(m * g),
                      a.shares.begin() + static_cast<std::ptrdiff_t>((m + 1) * g));
  }
  return out;
}

}  // namespace

// Releases (sign -1) or restores (+1) member m of running job i on the scratch state and in
// its queues' usage.
void ElasticStage::toggle_member(size_t i, int32_t m, int sign) {
  s_.toggle_running(i, members_of(*s_.snap.running[i].alloc, m, m + 1), sign);
}

// Shrinks one member at a time, gang by gang, trying the placement after each.
std::optional<Allocation> ElasticStage::shrink_until_fits(const PendingJob& pj,
                                                          const std::vector<size_t>& victims,
                                                          const std::function<bool(size_t)>& skip,
                                                          const JobSpec& place_as) {
  std::vector<std::pair<size_t, int32_t>> shrunk;  // (running index, members kept)
  Allocation alloc;
  bool placed = false;
  for (size_t pos = 0; pos < victims.size(); ++pos) {
    const size_t v = victims[pos];
    const RunningJob& r = s_.snap.running[v];
    int32_t members = r.alloc->members();
    if (r.spec->min_members >= members || r.start_time > s_.snap.now) continue;
    if (skip && skip(pos)) continue;
    while (!placed && members > r.spec->min_members) {
      toggle_member(v, --members, -1);
      if (placer_.try_place(place_as, alloc)) {
        if (s_.over_type_limit(s_.current_leaf, alloc) == kNoId) {
          placed = true;
        } else {
          s_.scratch.release(alloc);
        }
      }
    }
    shrunk.emplace_back(v, members);
    if (placed) break;
  }
  if (!placed) {
    for (auto it = shrunk.rbegin(); it != shrunk.rend(); ++it) {
      const int32_t had = s_.snap.running[it->first].alloc->members();
      for (int32_t m = it->second; m < had; ++m) toggle_member(it->first, m, +1);
    }
    return std::nullopt;
  }
  for (const auto& [i, keep] : shrunk) {
    s_.set_resized(i, keep);
    s_.out.resizes.push_back(Resize{s_.snap.running[i].id,
                                    members_of(*s_.snap.running[i].alloc, 0, keep), false, pj.id});
  }
  s_.capacity_freed();
  return alloc;
}

std::optional<Allocation> ElasticStage::take_back_growth(const PendingJob& pj) {
  const JobSpec& job = *pj.spec;
  const ShapeKey shape = s_.shape(job);
  if (s_.shrink_failed.contains(shape)) return std::nullopt;
  std::vector<size_t> cands;
  for (size_t i = 0; i < s_.snap.running.size(); ++i) {
    const RunningJob& r = s_.snap.running[i];
    if (s_.evicted(i) || s_.resized(i) != 0 || r.alloc->members() <= r.spec->min_members) continue;
    // Only gangs holding GPUs it could use: its types, on its eligible nodes.
    if (milli_on_types(s_.cluster, *r.alloc, job.allowed_types, job.eligible_nodes.get()) == 0) {
      continue;
    }
    cands.push_back(i);
  }
  std::sort(cands.begin(), cands.end(), [&](size_t a, size_t b) {
    const RunningJob &x = s_.snap.running[a], &y = s_.snap.running[b];
    const int32_t sx = x.alloc->members() - x.spec->min_members;
    const int32_t sy = y.alloc->members() - y.spec->min_members;
    return std::make_tuple(-sx, -x.start_time, x.id) < std::make_tuple(-sy, -y.start_time, y.id);
  });
  if (!cands.empty()) {
    if (auto alloc = shrink_until_fits(pj, cands, nullptr, job)) return alloc;
  }
  s_.shrink_failed.insert(shape);
  return std::nullopt;
}

void ElasticStage::grow() {
  std::vector<size_t> order;
  for (size_t i = 0; i < s_.snap.running.size(); ++i) {
    const RunningJob& r = s_.snap.running[i];
    if (s_.evicted(i) || s_.resized(i) != 0 || r.alloc->members() >= r.spec->max_members) continue;
    if (s_.snap.now - r.start_time < s_.policy.resize_interval) continue;
    if (r.expected_end >= 0 && r.expected_end - s_.snap.now < s_.policy.resize_interval) continue;
    order.push_back(i);
  }
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const RunningJob &x = s_.snap.running[a], &y = s_.snap.running[b];
    return std::tie(x.start_time, x.id) < std::tie(y.start_time, y.id);
  });
  for (size_t i : order) {
    const RunningJob& r = s_.snap.running[i];
    s_.current_leaf = s_.running_leaf(i);
    const int32_t members = r.alloc->members();
    for (int32_t k = r.spec->max_members - members; k > 0; --k) {
      if (s_.over_limit(s_.current_leaf, amounts_of(*r.spec, k)) != kNoId) continue;
      Allocation add;
      if (!s_.policy.scorer->place(s_.scratch, *r.spec, k, s_.rng, add)) continue;
      if (s_.over_type_limit(s_.current_leaf, add) != kNoId) {
        s_.scratch.release(add);
        continue;
      }
      s_.add_usage(s_.current_leaf, *r.spec, add, +1);
      Allocation grown = *r.alloc;
      grown.member_node.insert(grown.member_node.end(), add.member_node.begin(),
                               add.member_node.end());
      grown.shares.insert(grown.shares.end(), add.shares.begin(), add.shares.end());
      s_.set_resized(i, members + k);
      s_.out.resizes.push_back(Resize{r.id, std::move(grown), true, kNoId});
      break;
    }
  }
}

}  // namespace tessera
