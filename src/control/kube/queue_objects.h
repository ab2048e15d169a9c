// Tessera's Queue objects (queues.scheduling.tessera.io/v1alpha1, cluster-scoped; the CRD is
// deploy/kubernetes/01-queue-crd.yaml): the queue tree as Kubernetes objects, one per queue,
// each naming its parent. build_queue_tree() turns the objects the scheduler has seen into the
// engine's QueueTree, or says why it cannot (per Queue where one is to blame), so that the
// scheduler keeps its last good tree.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "model/queue_tree.h"

namespace tessera::kube {

struct QueueObject {
  std::string name, resource_version;
  int64_t generation = 0;
  nlohmann::json spec;  // as the API server validated it (the CRD's schema)
};

// Throws std::invalid_argument naming the field for an object without metadata.name.
QueueObject parse_queue_object(const nlohmann::json& queue);

struct QueueTreeBuild {
  std::optional<QueueTree> tree;  // none: the objects do not make a tree
  // Why, by Queue name: a parent that does not exist, a cycle, a value the tree refuses.
  std::map<std::string, std::string> problems;
  std::string error;  // the tree's own refusal, naming the queue and field ("" when built)
};

// The tree the Queue objects describe (top-level queues are those with no parent). `settings`
// are the tree-wide fairness and preemption settings (the objects hold only queues).
QueueTreeBuild build_queue_tree(const std::map<std::string, QueueObject>& queues,
                                const FairnessSettings& settings);

}  // namespace tessera::kube
