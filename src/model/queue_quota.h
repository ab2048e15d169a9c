// Quota arithmetic shared by the queue tree's checks (queue_tree.cc) and its YAML reader
// (queue_tree_yaml.cc), within the model layer.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "model/gpu_type.h"
#include "model/queue_tree.h"

namespace tessera::queue_quota {

// Larger quotas are typos; the bound keeps sums of many guarantees far below kUnlimited.
inline constexpr int64_t kMaxQuota = int64_t{1} << 50;

// Queue trees name GPU types by the built-in table; a cluster's table extends it, so the ids
// agree with every cluster's.
const GpuTypeTable& builtin_types();
std::string type_name(GpuTypeId t);

// The entry of type t, added (no guarantee, no limit) if the queue has none; keeps the order.
TypeQuota& type_entry(QueueSpec& q, GpuTypeId t);

// What a queue's children guarantee together, per dimension and per GPU type.
struct GuaranteeSum {
  Amounts dims = kZeroAmounts;
  std::map<GpuTypeId, int64_t> types;

  void add(const QueueSpec& q) {
    dims = dims + q.guarantee;
    for (const TypeQuota& tq : q.by_type) types[tq.type] += tq.guarantee_milli;
  }
};

// A team's guarantee is what its sub-teams are guaranteed unless it says otherwise: a parent
// that gives none (zero) on a dimension or GPU type takes its children's sum there.
void derive_guarantee(QueueSpec& parent, const GuaranteeSum& sum);

}  // namespace tessera::queue_quota
