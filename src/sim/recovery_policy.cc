#include "sim/recovery_policy.h"

namespace tessera {

namespace {

class Requeue final : public RecoveryPolicy {
 public:
  std::string_view name() const override { return "requeue"; }
  RecoveryAction choose(const RecoveryState&, Rng&) override { return RecoveryAction::kRequeue; }
};

class InPlace final : public RecoveryPolicy {
 public:
  std::string_view name() const override { return "in-place"; }
  RecoveryAction choose(const RecoveryState&, Rng&) override { return RecoveryAction::kAnywhere; }
};

}  // namespace

RecoveryAction QLearningRecovery::choose(const RecoveryState& s, Rng& rng) {
  if (rng.uniform() < epsilon_) {
    return static_cast<RecoveryAction>(rng.below(kNumRecoveryActions));
  }
  int best = 0;
  for (int a = 1; a < kNumRecoveryActions; ++a) {
    if (q(s, static_cast<RecoveryAction>(a)) > q(s, static_cast<RecoveryAction>(best))) best = a;
  }
  return static_cast<RecoveryAction>(best);
}

void QLearningRecovery::learn(const RecoveryState& s, RecoveryAction a, double reward) {
  double& v = q_[index(s, a)];
  v += rate_ * (reward - v);
  ++updates_;
}

std::unique_ptr<RecoveryPolicy> make_recovery_policy(std::string_view name) {
  if (name == "requeue") return std::make_unique<Requeue>();
  if (name == "in-place") return std::make_unique<InPlace>();
  if (name == "q-learning") return std::make_unique<QLearningRecovery>();
  return nullptr;
}

}  // namespace tessera
