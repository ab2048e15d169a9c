// What happens to a job a node failure stopped: requeue it and let the scheduler
// place it, or restart it at once in place of its lost members (the survivors keep their
// GPUs; the lost members go to the same rack if it has room, else anywhere). Policies:
//  - requeue: always wait in the queue (with priority: its place is its submission time);
//  - in-place: the heuristic, restart in place when it fits (same rack first), else requeue;
//  - q-learning: learns which of the three to take from the situation, rewarded by how soon
//    the job ran again and how many more racks it spans (one-step episodes: a contextual
//    bandit, the degenerate case of Q-learning with no successor state).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "engine/rng.h"

namespace tessera {

enum class RecoveryAction : uint8_t { kRequeue, kSameRack, kAnywhere };
inline constexpr int kNumRecoveryActions = 3;

// What a policy sees, each in 4 buckets (0: none or almost none ... 3: plenty).
struct RecoveryState {
  uint8_t rack_free = 0;     // free GPUs in the failed node's rack, against the job's lost GPUs
  uint8_t cluster_free = 0;  // free GPUs in the cluster, against the job's GPUs
  uint8_t queue = 0;         // jobs waiting: 0, 1-9, 10-99, 100+
};

class RecoveryPolicy {
 public:
  virtual ~RecoveryPolicy() = default;
  virtual std::string_view name() const = 0;
  virtual RecoveryAction choose(const RecoveryState& s, Rng& rng) = 0;
  // The outcome of a choice, once the job runs again (higher is better).
  virtual void learn(const RecoveryState&, RecoveryAction, double /*reward*/) {}
};

// "requeue", "in-place" or "q-learning"; nullptr for anything else.
std::unique_ptr<RecoveryPolicy> make_recovery_policy(std::string_view name);

// The Q-learning policy's table, for tests and reports: Q[rack][cluster][queue][action].
class QLearningRecovery final : public RecoveryPolicy {
 public:
  explicit QLearningRecovery(double epsilon = 0.1, double learning_rate = 0.2)
      : epsilon_(epsilon), rate_(learning_rate) {}
  std::string_view name() const override { return "q-learning"; }
  RecoveryAction choose(const RecoveryState& s, Rng& rng) override;
  void learn(const RecoveryState& s, RecoveryAction a, double reward) override;
  double q(const RecoveryState& s, RecoveryAction a) const { return q_[index(s, a)]; }
  uint64_t updates() const { return updates_; }

 private:
  static size_t index(const RecoveryState& s, RecoveryAction a) {
    return ((size_t{s.rack_free} * 4 + s.cluster_free) * 4 + s.queue) * kNumRecoveryActions +
           static_cast<size_t>(a);
  }
  double epsilon_, rate_;
  // Optimistic start (0 = "ran again at once, no more racks"), so every action gets tried.
  std::array<double, 4 * 4 * 4 * kNumRecoveryActions> q_{};
  uint64_t updates_ = 0;
};

}  // namespace tessera
