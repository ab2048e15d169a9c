// Long-term (decayed) usage kept in a ConfigMap, so that a restarted scheduler, or the replica
// that takes over the lease, carries each queue's usage history on instead of forgetting it
// (which would hand a heavy tenant a fresh start). The JSON is serve's
// (control/decayed_usage_json.h), in data["decayed-usage"].
#pragma once

#include <string>

#include "backend/kube/kube_client.h"
#include "control/decayed_usage_json.h"

namespace tessera::kube {

class UsageStore {
 public:
  UsageStore(Client& client, std::string ns, std::string name)
      : client_(client), ns_(std::move(ns)), name_(std::move(name)) {}

  // The saved usage; empty when there is none yet. A ConfigMap that cannot be read or parsed
  // gives empty too, with the reason in *error (usage is a memory, not a ledger: start afresh).
  UsageByPath load(std::string* error);
  // Creates or replaces the ConfigMap (only the leader writes); false with *error on failure.
  bool save(const UsageByPath& usage, double now, std::string* error);

  std::string where() const { return ns_ + "/" + name_; }

 private:
  Client& client_;
  std::string ns_, name_;
};

}  // namespace tessera::kube
