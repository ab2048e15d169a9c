// Power in a scheduling cycle (docs/energy.md): the estimated draw of what runs, the
// caps it must stay under, and each job's GPU power limit.
//
// A job's estimated draw above idle is, per GPU it holds, its share of the GPU times (the
// power its workload draws at its limit - the GPU's idle power), from the power model's curves.
// The cluster's draw is `idle_w` (node base power and every GPU idle, as the caller counts it)
// plus those increments; the same per rack. The cycle admits a start only if every cap still
// holds. Two ways to honour a cap (Policy::power_shifting):
//   hold:  a job that does not fit under the cap waits (kPowerCapped) until power frees; no
//          running job's limit changes (a job that could not run at its preferred limit even on
//          an idle cluster starts at the highest limit that could);
//   shift: running and starting jobs' power limits are lowered, cheapest first (the least
//          speed lost per watt saved, a greedy solution of the knapsack the curves pose), and
//          only what still does not fit at the lowest limits waits. At the end of the cycle,
//          power left under the caps raises lowered limits again, most speed per watt first.
// Every job runs at most at its preferred limit: the energy knob's choice for its queue's
// energy_weight (0: TDP).
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "engine/decisions.h"
#include "insight/power_model.h"
#include "model/allocation.h"
#include "model/cluster.h"
#include "model/job.h"

namespace tessera {

inline constexpr double kNoPowerCap = std::numeric_limits<double>::infinity();

struct PowerView {
  const BoundPowerModel* model = nullptr;  // not owned; required
  double idle_w = 0;                       // the cluster's draw with nothing running
  double cap_w = kNoPowerCap;
  std::vector<double> rack_idle_w;  // by RackId (empty: no rack caps)
  std::vector<double> rack_cap_w;   // by RackId; kNoPowerCap where none
  // By NodeId: thermal headroom, the most a node may draw above idle (a hot spot takes only
  // low-power work); < 0 where unconstrained; empty: none.
  std::vector<double> node_headroom_w;
  double default_energy_weight = 0;  // for queues that set none
};

// What one GPU of type `t` draws above idle (W) running a job of `model` at `limit_w` (0: TDP),
// and the limit the energy knob `eta` prefers there (TDP for eta 0).
double gpu_increment(const PowerView& v, GpuTypeId t, uint32_t model, double limit_w);
double preferred_limit_on(const PowerView& v, GpuTypeId t, uint32_t model, double eta);

// The draw above idle (W) of `job` on `alloc` at GPU power limit `limit_w` (0: TDP), and per
// rack it touches. Its curve is that of the GPU type of its first member's node.
double power_increment(const PowerView& v, const Cluster& c, const JobSpec& job,
                       const Allocation& alloc, double limit_w);

// Why `job` could never start under the cluster's power cap or its racks' (even alone, at the
// lowest power limit of the GPU type it may use that draws least), or nullopt.
std::optional<std::string> power_infeasible_reason(const PowerView& v, const Cluster& c,
                                                   const JobSpec& job);

// The limit a job prefers: the energy knob's for weight `eta` on its GPU type.
double preferred_limit(const PowerView& v, const Cluster& c, const JobSpec& job,
                       const Allocation& alloc, double eta);

// The power ledger of one cycle. Holders are running jobs and jobs started in this cycle.
class PowerLedger {
 public:
  PowerLedger(const PowerView& v, const Cluster& c, bool shifting);

  // Adds a holder (a running job at its limit, or one to start at its preferred limit) and
  // returns its id. Running jobs are added as they are, even past a cap (the caps may have
  // been lowered since they started).
  size_t add(JobId job, const JobSpec& spec, const Allocation& alloc, double limit_w,
             double preferred_w);
  // Takes a holder off (a preemption victim) or puts it back.
  void set_active(size_t h, bool active);
  // Whether holder `h` (just added) may stay: every cap it touches holds with it, after
  // lowering limits when shifting. If not, everything this call changed is undone, `h` is
  // taken off, and `why` says which cap (code kPowerCapped).
  bool admit(size_t h, PendingReason& why);
  // Raises lowered limits back towards the preferred ones within the caps (shifting only).
  void restore();

  double limit(size_t h) const { return holders_[h].limit; }
  JobId job(size_t h) const { return holders_[h].job; }
  size_t size() const { return holders_.size(); }
  double draw_w() const { return draw_; }
  // What node n draws above idle now (tracked only where it has thermal headroom).
  double node_draw_w(NodeId n) const { return node_draw_.empty() ? 0.0 : node_draw_[n]; }

 private:
  struct Holder {
    JobId job = 0;
    const PowerCurve* curve = nullptr;
    double idle_w = 0;                             // per GPU
    double min_limit = 0;                          // the GPU's lowest limit
    double gpus = 0;                               // whole-GPU equivalents held
    std::vector<std::pair<RackId, double>> racks;  // GPUs held per rack
    std::vector<std::pair<NodeId, double>> nodes;  // ... per node (with thermal headroom only)
    double limit = 0;
    double preferred = 0;
    bool active = true;
  };
  double inc(const Holder& h, double limit) const;  // draw above idle at `limit`
  void apply(Holder& h, double limit);              // moves h to `limit`, updating draws
  // A cap exceeded now that holder `h` touches: kNoId for the cluster's, a RackId, or nullopt;
  // a node's thermal headroom is kNodeCap + NodeId.
  std::optional<uint32_t> violated(const Holder& h) const;
  static constexpr uint32_t kNodeCap = 1u << 31;
  void add_draw(const Holder& h, double d);  // d W more above idle, spread over h's racks/nodes
  double next_lower(const Holder& h) const;  // the next lower limit point, or 0 for none
  bool fits_alone(const Holder& h, double limit) const;  // under every cap on an idle cluster
  double next_higher(const Holder& h) const;             // the next higher point <= preferred, or 0

  const PowerView& view_;
  const Cluster& cluster_;
  bool shifting_;
  std::vector<Holder> holders_;
  double draw_ = 0;
  std::vector<double> rack_draw_;
  std::vector<double> node_draw_;  // by NodeId, when the view has thermal headroom
};

}  // namespace tessera
