// How fast a job progresses on the placement it got (DESIGN.md, "Simulator execution model").
//
// A job's work is measured in seconds on its reference placement (consolidated on as few
// nodes as possible, on the reference GPU type V100). speed() is the job's throughput on the
// given placement divided by its throughput on the reference placement, so a job with
// work_seconds W running at speed s finishes after W / s seconds (plus restart costs).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "model/allocation.h"
#include "model/cluster.h"
#include "model/job.h"

namespace tessera {

// What the execution model needs to know of a placement.
struct PlacementShape {
  std::vector<uint16_t> members_per_node;  // one entry per node used, sorted descending
  int32_t gpus_per_member = 1;
  int32_t gpu_milli = 1000;  // share of each GPU held (1000 = whole)
  GpuTypeId slowest_type = 0;
  uint32_t nodes = 0, racks = 0, spines = 0;

  int32_t members() const {
    int32_t m = 0;
    for (auto k : members_per_node) m += k;
    return m;
  }
};

PlacementShape shape_of(const Cluster& cluster, const Allocation& a);

// Relative speed of type `t` over the reference type V100 (1 where the table has no V100).
double relative_to_v100(const GpuTypeTable& types, GpuTypeId t);

class ExecutionModel {
 public:
  virtual ~ExecutionModel() = default;
  // Completes a job read from a trace: fills work_seconds where the trace describes the work
  // instead of a duration (Pollux applications), given the cluster it will run on.
  // Throws InputError (naming job.source) when the job cannot be modelled.
  virtual void prepare(JobSpec& job, const Workload& w, const Cluster& c) const = 0;
  // Throughput on `shape` relative to the reference placement; > 0.
  virtual double speed(const JobSpec& job, const Workload& w, const PlacementShape& shape,
                       const Cluster& c) const = 0;
};

// The measured model: Pollux application profiles for bert/cifar10/deepspeech2/imagenet/ncf/
// yolov3 jobs, Gavel's throughputs for its model classes, and the GPU relative-speed table for
// the rest. `data_dir` is ../shared/data (missing files disable the parts that need them).
std::unique_ptr<ExecutionModel> make_measured_execution_model(const std::string& data_dir);

}  // namespace tessera
