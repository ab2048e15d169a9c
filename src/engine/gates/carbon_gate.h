// Carbon-aware deferral: a best-effort job of a queue with carbon_defer_seconds waits for a
// cleaner hour within that bound of its submission, when the hour is at least 10 % cleaner
// over its expected run (kCarbonDeferred).
#pragma once

#include "engine/gates/admission_gate.h"

namespace tessera {

class CarbonGate final : public AdmissionGate {
 public:
  std::string_view name() const override { return "carbon"; }
  bool admit(const GateInput& in, const JobSpec& job, QueueId leaf,
             PendingReason& reason) const override;
};

}  // namespace tessera
