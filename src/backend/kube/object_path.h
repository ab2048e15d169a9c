// Paths of the Kubernetes REST API: core group under /api/v1, named groups under /apis/G/V,
// namespaced or cluster-scoped collections, objects and subresources, with escaping.
//   object_path(kPods, "ml", "train-0", "binding") == "/api/v1/namespaces/ml/pods/train-0/binding"
//   object_path(kPodGroupsX, "ml", "job-a", "status")
//       == "/apis/scheduling.x-k8s.io/v1alpha1/namespaces/ml/podgroups/job-a/status"
//   collection_path(kNodes) == "/api/v1/nodes"; collection_path(kPods) == "/api/v1/pods"
#pragma once

#include <string>
#include <string_view>

namespace tessera::kube {

struct ApiResource {
  std::string group;     // "" for the core group
  std::string version;   // "v1", "v1alpha1", ...
  std::string resource;  // the plural: "pods", "podgroups"
  bool namespaced = true;
};

// Well-known resources.
inline const ApiResource kPods{"", "v1", "pods", true};
inline const ApiResource kNodes{"", "v1", "nodes", false};
inline const ApiResource kNamespaces{"", "v1", "namespaces", false};
inline const ApiResource kCoreEvents{"", "v1", "events", true};
inline const ApiResource kEvents{"events.k8s.io", "v1", "events", true};
inline const ApiResource kConfigMaps{"", "v1", "configmaps", true};
inline const ApiResource kSecrets{"", "v1", "secrets", true};
inline const ApiResource kLeases{"coordination.k8s.io", "v1", "leases", true};
inline const ApiResource kPriorityClasses{"scheduling.k8s.io", "v1", "priorityclasses", false};
inline const ApiResource kPodDisruptionBudgets{"policy", "v1", "poddisruptionbudgets", true};
inline const ApiResource kPodGroupsX{"scheduling.x-k8s.io", "v1alpha1", "podgroups", true};
inline const ApiResource kPodGroupsVolcano{"scheduling.volcano.sh", "v1beta1", "podgroups", true};
inline const ApiResource kJobs{"batch", "v1", "jobs", true};
inline const ApiResource kJobSets{"jobset.x-k8s.io", "v1alpha2", "jobsets", true};
inline const ApiResource kRayClusters{"ray.io", "v1", "rayclusters", true};
inline const ApiResource kTesseraQueues{"scheduling.tessera.io", "v1alpha1", "queues", false};

// "/api/v1" for the core group, else "/apis/GROUP/VERSION".
std::string api_prefix(const ApiResource& r);

// The collection: all namespaces when `ns` is empty (or the resource is cluster-scoped).
std::string collection_path(const ApiResource& r, std::string_view ns = "");

// One object, optionally a subresource ("status", "binding", "eviction"). A namespaced
// resource needs a namespace; a cluster-scoped one ignores `ns`. Throws std::invalid_argument
// for an empty name (or namespace where required), "." or "..".
std::string object_path(const ApiResource& r, std::string_view ns, std::string_view name,
                        std::string_view subresource = "");

// Percent-escapes one path segment (everything but A-Z a-z 0-9 - . _ ~).
std::string escape_path_segment(std::string_view segment);

// Appends "?key=value" or "&key=value" (value escaped with escape_query) to a path.
std::string add_query(std::string path, std::string_view key, std::string_view value);

}  // namespace tessera::kube
