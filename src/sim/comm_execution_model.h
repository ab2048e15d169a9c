// Communication-aware execution model (docs/execution-model.md, "Communication model"):
// a decorator around the measured model that adds the gradient all-reduce time a placement
// pays beyond what the measurement it is scaled from already includes.
//
// The measured profiles (Pollux's placements, Gavel's consolidated / unconsolidated
// throughputs) were taken inside one rack: their step times include all-reduce over the
// node NICs. A gang whose ring crosses rack uplinks or the spine pays the difference
//
//   Δcomm = ring(bytes, m nodes, link of the outermost level) − ring(bytes, m nodes, node NIC)
//
// (comm_cost.h's ring_allreduce_s over the cluster's links; m = nodes used; bytes = 4 ×
// parameters, fp32 gradients), and its step time T / s (T the measured step time on the
// reference placement, s the wrapped model's speed, which includes the GPU type) becomes
// T / s + Δcomm:
//
//   speed' = T / (T / s + Δcomm) = s · T / (T + s · Δcomm)
//
// Jobs whose model size or reference step time is unknown are not adjusted.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "sim/execution_model.h"

namespace tessera {

// Parameters of a model class by its name (a Pollux application such as "bert", or a Gavel
// model such as "ResNet-50 (batch size 64)": the part before " (batch size" is looked up);
// 0 when unknown. docs/execution-model.md lists the values and their sources.
double model_parameters(std::string_view model);

// Bytes of fp32 gradients all-reduced per step: 4 × model_parameters; 0 when unknown.
double gradient_bytes(std::string_view model);

// Extra all-reduce seconds per step of `shape` over a placement inside one rack (see above);
// 0 when the shape stays inside one rack or uses a single node.
double extra_allreduce_s(const Cluster& cluster, const PlacementShape& shape, double bytes);

// A job's measured step (iteration) time on its reference placement on V100, in seconds;
// 0 when unknown.
using ReferenceStepTime =
    std::function<double(const JobSpec& job, const Workload& w, const Cluster& c)>;

class CommExecutionModel final : public ExecutionModel {
 public:
  CommExecutionModel(std::unique_ptr<ExecutionModel> inner, ReferenceStepTime reference_step);

  void prepare(JobSpec& job, const Workload& w, const Cluster& c) const override;
  double speed(const JobSpec& job, const Workload& w, const PlacementShape& shape,
               const Cluster& c) const override;

 private:
  std::unique_ptr<ExecutionModel> inner_;
  ReferenceStepTime reference_step_;
};

// The decorator with reference step times from the measured data in `data_dir`
// (../shared/data): Pollux's iteration time on the job's reference placement at its batch,
// or 1 / Gavel's isolated V100 throughput at the job's scale (largest measured scale <= its
// GPUs).
std::unique_ptr<ExecutionModel> make_comm_execution_model(std::unique_ptr<ExecutionModel> inner,
                                                          const std::string& data_dir);

}  // namespace tessera
