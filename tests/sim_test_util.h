// Helpers for tests that run the simulator.
#pragma once

#include "sim/execution_model.h"

namespace tessera::testing {

// Every job runs at reference speed wherever it lands, so a test is about who gets GPUs and
// when, and a job's duration is its work.
class UnitSpeed final : public ExecutionModel {
 public:
  void prepare(JobSpec&, const Workload&, const Cluster&) const override {}
  double speed(const JobSpec&, const Workload&, const PlacementShape&,
               const Cluster&) const override {
    return 1.0;
  }
};

}  // namespace tessera::testing
