// Admission gates: before a cycle tries to place a waiting job, whether the job may start now at
// all. A gate that holds a job back fills its pending reason, and the job waits without a
// reservation: it is short of something other than GPUs (its queue's quota or share, a cleaner
// hour, GPUs held back for inference). The cycle asks its gates in order; the first that holds
// the job decides. Each gate is a unit of its own with its own tests
// (tests/admission_gates_test.cc); the policy and snapshot decide which gates a cycle has.
#pragma once

#include <memory>
#include <string_view>
#include <vector>

#include "engine/decisions.h"
#include "engine/fair_share.h"
#include "engine/policy.h"
#include "engine/snapshot.h"
#include "model/cluster_state.h"

namespace tessera {

// What a gate reads of the cycle, as it is when the job comes up.
struct GateInput {
  const Snapshot& snap;
  const QueueTree& tree;
  const QueueShares& shares;
  const std::vector<Amounts>& live;  // what each queue holds on the cycle's scratch state
  const ClusterState& scratch;       // the cycle's ledger, with its starts so far
};

class AdmissionGate {
 public:
  virtual ~AdmissionGate() = default;
  virtual std::string_view name() const = 0;
  // True: the job may go on to placement. False: it waits; `reason` says why (its job, need
  // and free GPUs are filled in already).
  virtual bool admit(const GateInput& in, const JobSpec& job, QueueId leaf,
                     PendingReason& reason) const = 0;
};

// The gates a cycle asks, in order: quota, bounded lending, carbon deferral, inference reserve
// (those the policy and snapshot call for).
std::vector<std::unique_ptr<AdmissionGate>> admission_gates(const Snapshot& snap,
                                                            const Policy& policy,
                                                            const QueueTree& tree);

// The first queue on the leaf's path whose limit `need` more would exceed, or kNoId.
QueueId first_over_limit(const QueueTree& tree, const std::vector<Amounts>& live, QueueId leaf,
                         const Amounts& need);
// The first queue on the leaf's path, below `top`, that `need` more would take past its fair
// share, or kNoId.
QueueId first_over_share(const QueueTree& tree, const QueueShares& shares,
                         const std::vector<Amounts>& live, QueueId leaf, QueueId top,
                         const Amounts& need);
// Reason fields for a queue held at its limit, or at its fair share.
void set_quota_reason(const QueueTree& tree, const std::vector<Amounts>& live, QueueId q,
                      PendingReason& reason);
void set_fair_share_reason(const QueueShares& shares, const std::vector<Amounts>& live, QueueId q,
                           PendingReason& reason);

}  // namespace tessera
