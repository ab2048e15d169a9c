// Cluster: the objects a fresh cluster starts with: the four system namespaces with their
// default ServiceAccounts, the two system PriorityClasses, and the CRDs of the PodGroup APIs
// (scheduler-plugins and Volcano), which are served as if installed.
#include <tuple>

#include "kube_emulator/cluster.h"

namespace kube_emulator {

namespace {
const std::string kNamespaces = "/namespaces";
const std::string kPriorityClasses = "scheduling.k8s.io/priorityclasses";
const std::string kCrds = "apiextensions.k8s.io/customresourcedefinitions";
}  // namespace

void Cluster::seed_builtin_objects() {
  const std::string now = rfc3339(Clock::now());
  const auto meta = [&](const std::string& name, const std::string& ns) {
    json m = {{"name", name}, {"uid", random_.uid()}, {"creationTimestamp", now}};
    if (!ns.empty()) m["namespace"] = ns;
    return m;
  };
  for (const char* ns : {"default", "kube-system", "kube-public", "kube-node-lease"}) {
    json n = {{"apiVersion", "v1"},
              {"kind", "Namespace"},
              {"metadata", meta(ns, "")},
              {"spec", {{"finalizers", {"kubernetes"}}}},
              {"status", {{"phase", "Active"}}}};
    n["metadata"]["labels"] = {{"kubernetes.io/metadata.name", ns}};
    put_locked(kNamespaces, ns, n);
    put_locked(
        "/serviceaccounts", object_key(ns, "default"),
        {{"apiVersion", "v1"}, {"kind", "ServiceAccount"}, {"metadata", meta("default", ns)}});
  }
  for (const auto& [name, value] : std::vector<std::pair<std::string, int64_t>>{
           {"system-node-critical", 2000001000}, {"system-cluster-critical", 2000000000}}) {
    put_locked(kPriorityClasses, name,
               {{"apiVersion", "scheduling.k8s.io/v1"},
                {"kind", "PriorityClass"},
                {"metadata", meta(name, "")},
                {"value", value},
                {"globalDefault", false},
                {"preemptionPolicy", "PreemptLowerPriority"},
                {"description", "Used for system critical pods that must run in the cluster."}});
  }
  // The PodGroup CRDs, as if installed (scheduler-plugins and Volcano).
  for (const auto& [group, version, plural, kind] :
       std::vector<std::tuple<std::string, std::string, std::string, std::string>>{
           {"scheduling.x-k8s.io", "v1alpha1", "podgroups", "PodGroup"},
           {"scheduling.x-k8s.io", "v1alpha1", "elasticquotas", "ElasticQuota"},
           {"scheduling.volcano.sh", "v1beta1", "podgroups", "PodGroup"},
           {"scheduling.volcano.sh", "v1beta1", "queues", "Queue"}}) {
    const std::string name = plural + "." + group;
    json names = {{"plural", plural},
                  {"singular", registry_.find(group, version, plural)->singular},
                  {"kind", kind},
                  {"listKind", kind + "List"}};
    put_locked(
        kCrds, name,
        {{"apiVersion", "apiextensions.k8s.io/v1"},
         {"kind", "CustomResourceDefinition"},
         {"metadata", meta(name, "")},
         {"spec",
          {{"group", group},
           {"names", names},
           {"scope", kind == "Queue" ? "Cluster" : "Namespaced"},
           {"versions",
            {{{"name", version},
              {"served", true},
              {"storage", true},
              {"subresources", {{"status", json::object()}}},
              {"schema",
               {{"openAPIV3Schema",
                 {{"type", "object"}, {"x-kubernetes-preserve-unknown-fields", true}}}}}}}}}},
         {"status",
          {{"acceptedNames", names},
           {"storedVersions", {version}},
           {"conditions",
            {{{"type", "Established"},
              {"status", "True"},
              {"reason", "InitialNamesAccepted"},
              {"lastTransitionTime", now}}}}}}});
  }
}

}  // namespace kube_emulator
