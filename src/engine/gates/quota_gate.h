// A job whose minimum would take a queue on its path past its limit waits (kQuotaExceeded).
#pragma once

#include "engine/gates/admission_gate.h"

namespace tessera {

class QuotaGate final : public AdmissionGate {
 public:
  std::string_view name() const override { return "quota"; }
  bool admit(const GateInput& in, const JobSpec& job, QueueId leaf,
             PendingReason& reason) const override;
};

}  // namespace tessera
