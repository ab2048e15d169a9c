// The engine's power policies in `tessera kube` (docs/kubernetes.md, "Power and energy"; the
// policies themselves: docs/energy.md, engine/power_budget.h): the PowerView each cycle sees,
// kept in step with a cluster whose nodes come and go.
//
//  - The view's idle draw, the peak and a cap given as a percentage of the peak are the
//    Cluster's: recomputed whenever ClusterModel rebuilds it (cluster_generation()).
//  - Thermal headroom is a node annotation (tessera.io/thermal-headroom-watts) that an operator
//    or a node agent may change at any time: read again for every cycle (one pass over the
//    nodes, far cheaper than the cycle), so a change reaches the next cycle.
//  - A GPU type the power model has no figures for cannot be refused as serve refuses it at
//    start (such a node may join at any time): the engine estimates it with the model's
//    assumed figures (unknown_power_spec(): TDP 300 W), each such type is named once in the
//    log with a node that has it, and no power limit is written for pods on it (a limit
//    derived from assumed figures could be far off the real GPU's range).
//
// Single-threaded: the scheduler thread calls it with the model's lock held.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>

#include "engine/decisions.h"
#include "engine/power_budget.h"
#include "insight/power_model.h"
#include "model/carbon_intensity.h"
#include "model/cluster.h"

namespace tessera::kube {

class ClusterModel;

// The power flags, as serve takes them (apps/kube_command.cc fills these).
struct PowerOptions {
  // The power model (the data dir's Zeus curves); null: no measurements (flat curves at TDP).
  std::shared_ptr<const PowerModel> model;
  double node_power_w = 0;   // base power of every node (CPU, memory, fans); 0: not counted
  std::string cap;           // "KW" or "N%" of the cluster's peak draw; "" = none
  bool shifting = false;     // under the cap, lower jobs' power limits before holding jobs
  double energy_weight = 0;  // Zeus's energy knob for queues that set none
  // Hourly carbon intensity on Unix time (carbon-aware deferral of queues with carbon_defer).
  std::shared_ptr<const CarbonIntensity> carbon;
};

// Refuses what serve refuses, in its words (std::invalid_argument naming the flag): shifting
// without a cap, an energy weight outside 0..1, shifting with elastic resizing, a cap that is
// not kW or a percentage. What depends on the nodes (a cap below the idle draw) is said in the
// log when the cluster is known, not refused: nodes come and go.
void check_power_options(const PowerOptions& o, bool elastic);

class KubePower {
 public:
  explicit KubePower(PowerOptions o);
  KubePower(const KubePower&) = delete;  // view_ points into this object
  KubePower& operator=(const KubePower&) = delete;

  // The view for a cycle on the model's Cluster now, or null when no power policy applies (no
  // cap, no energy weight anywhere, no node with thermal headroom): power then changes nothing.
  // Valid until the next call.
  const PowerView* view(const ClusterModel& m);
  // The carbon series for the snapshot (null: no deferral).
  const CarbonIntensity* carbon() const { return opt_.carbon.get(); }
  const PowerOptions& options() const { return opt_; }

  // The limit to write for a pod of a gang on `node` when the engine chose `limit_w` (0: TDP):
  // the limit rounded to whole watts when it is below the GPUs' TDP, else 0 (the default; no
  // annotation). 0 too on a node whose GPU type has no power figures.
  double annotated_limit(const Cluster& c, NodeId node, double limit_w) const;

  // Estimated IT draw (W) of the cluster for /metrics: every GPU at its holders' limits (idle
  // when free; 0 for a type without figures, as serve counts it) plus node base power.
  double draw_w(const ClusterModel& m) const;

 private:
  void rebuild(const ClusterModel& m);

  PowerOptions opt_;
  PowerModel flat_;  // the model when opt_.model is null
  const PowerModel& model() const { return opt_.model ? *opt_.model : flat_; }
  uint64_t generation_ = ~uint64_t{0};
  std::optional<BoundPowerModel> bound_;
  PowerView view_;
  bool cap_below_idle_said_ = false;
  std::set<std::string> types_said_;             // types without figures, named once
  std::map<std::string, std::string> bad_said_;  // node -> malformed headroom text logged
};

// The engine's words (`text`, describe()) for a pending reason, as a Kubernetes user reads
// them: a node's name for the engine's node number (thermal headroom), UTC times for the
// carbon series' Unix seconds.
std::string reason_words(const PendingReason& r, const Cluster& c, const std::string& text);

}  // namespace tessera::kube
