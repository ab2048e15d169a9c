// Power and thermal admission (engine/power_budget.h), for a cycle whose snapshot has a power
// view: a node without the thermal headroom for one of a job's members is out of bounds for it;
// a placement that fits the GPUs must also fit the node, rack and cluster power caps (lowering
// running jobs' limits where the policy shifts power), else it is tried away from the caps that
// refused it; when the cycle ends, lowered limits are raised again within the caps and every
// changed limit is reported.
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "engine/cycle_session.h"
#include "engine/power_budget.h"
#include "engine/stages/placer.h"

namespace tessera {

class PowerStage {
 public:
  // Requires s.snap.power. Running jobs are the ledger's first holders: holder i is
  // snap.running[i].
  PowerStage(CycleSession& s, Placer& placer);

  // When thermal headroom rules out a node `job` could use: places it on the others (true: in
  // `alloc`); nullopt when no node is ruled out (place it as usual).
  std::optional<bool> try_place_cool(const JobSpec& job, Allocation& alloc);
  // The reason of a job try_place_cool could not place: a node it lacks headroom on.
  void too_hot(PendingReason& reason) const;

  // Whether `pj` may start on `alloc` under the power caps; on failure `reason` says which cap.
  bool admit(const PendingJob& pj, const Allocation& alloc, PendingReason& reason);
  // After admit refused `alloc` (released by the caller) for a rack or node cap: places the job
  // again away from the racks and nodes that refused it, up to 4 times, and admits it. True:
  // `alloc` holds the admitted placement; false: `reason` says why it waits.
  bool place_away_from_caps(const PendingJob& pj, const JobSpec& job, Allocation& alloc,
                            PendingReason& reason);
  // The cycle recorded a start (its index in out.starts is the number recorded before): it
  // holds what the last successful admit added, if anything since the previous start.
  void started();
  // A victim's power frees with its GPUs (false), or is held again (true).
  void set_active(size_t running, bool active) { ledger_.set_active(running, active); }
  // When the cycle ends: raises lowered limits within the caps, and reports each start's limit
  // and each running job's changed one.
  void settle();

 private:
  static constexpr size_t kNoHolder = static_cast<size_t>(-1);
  double energy_weight(QueueId leaf) const;
  double member_draw_w(const JobSpec& job, NodeId n) const;
  std::shared_ptr<const NodeSet> thermal_restriction(const JobSpec& job);
  template <class Keep>
  std::shared_ptr<const NodeSet> eligible_where(const JobSpec& job, Keep&& keep) const;
  double default_limit(size_t running) const;

  CycleSession& s_;
  Placer& placer_;
  PowerLedger ledger_;
  // The ledger's holder of each start (kNoHolder for starts that did not pass admit, e.g.
  // elastic ones), and the holder admit just added.
  std::vector<size_t> start_holder_;
  size_t admitted_holder_ = kNoHolder;
  std::vector<NodeId> hot_nodes_;  // nodes with thermal headroom (computed on first use)
  NodeId hot_node_ = 0;
  double hot_need_w_ = 0;
  JobSpec thermal_job_;  // the job being placed, restricted to nodes with headroom
};

}  // namespace tessera
