// Where a running gang's members sit: one node per member and the GPU shares it holds.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "model/ids.h"

namespace tessera {

struct GpuShare {
  GpuId gpu = 0;
  int32_t milli = 0;
  bool operator==(const GpuShare&) const = default;
};

// Invariant: shares.size() == member_node.size() * gpus_per_member, member-major, and every
// share of member i lies on member_node[i].
struct Allocation {
  std::vector<NodeId> member_node;
  std::vector<GpuShare> shares;
  int32_t gpus_per_member = 0;
  int64_t cpu_milli_per_member = 0;
  int64_t mem_mib_per_member = 0;

  int32_t members() const { return static_cast<int32_t>(member_node.size()); }
  int64_t gpu_milli() const {
    int64_t m = 0;
    for (const auto& s : shares) m += s.milli;
    return m;
  }
  bool empty() const { return member_node.empty(); }
  // The distinct nodes its members sit on, ascending.
  std::vector<NodeId> nodes() const {
    std::vector<NodeId> n = member_node;
    std::sort(n.begin(), n.end());
    n.erase(std::unique(n.begin(), n.end()), n.end());
    return n;
  }
};

}  // namespace tessera
