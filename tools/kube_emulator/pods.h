// Pod semantics shared by the API layer and the fake kubelet: create-time defaulting (as the
// apiserver's defaulting and admission plugins), effective resource requests, the spec fields
// an update may change, and pod conditions.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>

#include "kube_emulator/util.h"

namespace kube_emulator {

// Resource name -> milli-units.
using Resources = std::map<std::string, int64_t>;

// Defaults a new pod: schedulerName, restartPolicy, terminationGracePeriodSeconds, dnsPolicy,
// container defaults, requests from limits, the default not-ready/unreachable tolerations,
// qosClass and status.phase Pending. `priority_of` resolves spec.priorityClassName (empty: the
// global default class) to (name, value, preemptionPolicy); nullopt: no such class.
struct PriorityInfo {
  std::string name;
  int64_t value = 0;
  std::string preemption_policy = "PreemptLowerPriority";
};
// Returns an error message (403 Forbidden, as the Priority admission plugin) or "".
std::string default_pod(
    json& pod, const std::function<std::optional<PriorityInfo>(const std::string&)>& priority_of);

// The pod's effective requests: max(sum of containers, each init container) plus overhead.
Resources pod_requests(const json& pod);
json resources_to_json(const Resources& r);

// "" when `updated` changes only what a pod update may change; else the 422 message.
std::string pod_update_error(const json& old_pod, const json& updated);

// Sets (or replaces) the condition of `type` in status.conditions; lastTransitionTime changes
// only when the status does.
void set_condition(json& obj, const std::string& type, const std::string& status,
                   const std::string& reason = "", const std::string& message = "");
std::string condition_status(const json& obj, const std::string& type);
bool pod_terminal(const json& pod);

// Events: the store keeps core/v1; events.k8s.io/v1 is a view converted on the way in and out.
json event_core_to_v1(const json& core);
json event_v1_to_core(const json& v1);

}  // namespace kube_emulator
