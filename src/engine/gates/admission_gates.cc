#include "engine/gates/carbon_gate.h"
#include "engine/gates/inference_reserve_gate.h"
#include "engine/gates/lending_gate.h"
#include "engine/gates/quota_gate.h"

namespace tessera {

std::vector<std::unique_ptr<AdmissionGate>> admission_gates(const Snapshot& snap,
                                                            const Policy& policy,
                                                            const QueueTree& tree) {
  std::vector<std::unique_ptr<AdmissionGate>> gates;
  gates.push_back(std::make_unique<QuotaGate>());
  if (policy.reclaim && tree.settings().borrow_max_runtime_seconds > 0) {
    gates.push_back(std::make_unique<LendingGate>());
  }
  if (snap.carbon != nullptr) gates.push_back(std::make_unique<CarbonGate>());
  if (snap.inference_reserve_milli > 0) gates.push_back(std::make_unique<InferenceReserveGate>());
  return gates;
}

}  // namespace tessera
