// Lending bounded in time (fairness.borrow_max_runtime): a job that would take its queue past
// its fair share starts only if it is expected to end within the bound. Not for
// inference-critical jobs (they preempt across queues anyway, and have an SLA) nor best-effort
// ones (anyone may preempt them: what they borrow is never withheld).
#pragma once

#include "engine/gates/admission_gate.h"

namespace tessera {

class LendingGate final : public AdmissionGate {
 public:
  std::string_view name() const override { return "lending"; }
  bool admit(const GateInput& in, const JobSpec& job, QueueId leaf,
             PendingReason& reason) const override;
};

}  // namespace tessera
