#include "model/queue_quota.h"

#include <algorithm>

namespace tessera::queue_quota {

const GpuTypeTable& builtin_types() {
  static const GpuTypeTable table = GpuTypeTable::builtin();
  return table;
}

std::string type_name(GpuTypeId t) {
  return t < builtin_types().size() ? builtin_types().at(t).name : "#" + std::to_string(t);
}

TypeQuota& type_entry(QueueSpec& q, GpuTypeId t) {
  auto it = std::lower_bound(q.by_type.begin(), q.by_type.end(), t,
                             [](const TypeQuota& a, GpuTypeId b) { return a.type < b; });
  if (it == q.by_type.end() || it->type != t) {
    TypeQuota fresh;
    fresh.type = t;
    it = q.by_type.insert(it, fresh);
  }
  return *it;
}

void derive_guarantee(QueueSpec& parent, const GuaranteeSum& sum) {
  for (size_t d = 0; d < kNumDims; ++d) {
    if (parent.guarantee[d] == 0) parent.guarantee[d] = sum.dims[d];
  }
  for (const auto& [t, g] : sum.types) {
    if (g == 0) continue;
    TypeQuota& tq = type_entry(parent, t);
    if (tq.guarantee_milli == 0) tq.guarantee_milli = g;
  }
}

}  // namespace tessera::queue_quota
