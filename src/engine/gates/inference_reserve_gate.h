// GPUs held back for forecast inference arrivals (Snapshot::inference_reserve_milli): a job of
// another class that would leave fewer free waits rather than take them
// (kReservedForInference); inference-critical jobs use them.
#pragma once

#include "engine/gates/admission_gate.h"

namespace tessera {

class InferenceReserveGate final : public AdmissionGate {
 public:
  std::string_view name() const override { return "inference-reserve"; }
  bool admit(const GateInput& in, const JobSpec& job, QueueId leaf,
             PendingReason& reason) const override;
};

}  // namespace tessera
