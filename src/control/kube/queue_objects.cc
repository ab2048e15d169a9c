#include "control/kube/queue_objects.h"

#include <set>
#include <stdexcept>
#include <vector>

#include "model/input_error.h"

namespace tessera::kube {

using nlohmann::json;

QueueObject parse_queue_object(const json& queue) {
  QueueObject q;
  const json& meta = queue.is_object() ? queue.value("metadata", json::object()) : json::object();
  q.name = meta.is_object() ? meta.value("name", "") : "";
  if (q.name.empty()) throw std::invalid_argument("queue: metadata.name is missing");
  q.resource_version = meta.value("resourceVersion", "");
  q.generation = meta.value("generation", int64_t{0});
  q.spec = queue.value("spec", json::object());
  if (!q.spec.is_object()) q.spec = json::object();
  return q;
}

namespace {

// A quota of the CRD (gpus, cpu, memory, gpuTypes) in the file format's words.
json quota_of(const json& q) {
  json out = json::object();
  if (!q.is_object()) return out;
  for (const char* key : {"gpus", "cpu", "memory"}) {
    if (q.contains(key)) out[key] = q[key];
  }
  if (q.contains("gpuTypes")) out["gpu_types"] = q["gpuTypes"];
  return out;
}

// One queue in the file format, with its children below it.
json queue_entry(const std::string& name, const json& spec,
                 const std::map<std::string, std::vector<std::string>>& children,
                 const std::map<std::string, QueueObject>& queues) {
  json e = {{"name", name}};
  if (spec.contains("weight")) e["weight"] = spec["weight"];
  if (spec.contains("guarantee")) e["guarantee"] = quota_of(spec["guarantee"]);
  if (spec.contains("borrowLimit")) e["borrow_limit"] = quota_of(spec["borrowLimit"]);
  if (spec.contains("priorityClasses")) e["priority_classes"] = spec["priorityClasses"];
  if (spec.contains("defaultPriorityClass")) {
    e["default_priority_class"] = spec["defaultPriorityClass"];
  }
  if (spec.contains("defaultSLA")) e["default_sla"] = spec["defaultSLA"];
  if (spec.contains("namespaces")) e["namespaces"] = spec["namespaces"];
  if (const auto kids = children.find(name); kids != children.end()) {
    json list = json::array();
    for (const std::string& c : kids->second) {
      list.push_back(queue_entry(c, queues.at(c).spec, children, queues));
    }
    e["queues"] = std::move(list);
  }
  return e;
}

}  // namespace

QueueTreeBuild build_queue_tree(const std::map<std::string, QueueObject>& queues,
                                const FairnessSettings& settings) {
  QueueTreeBuild out;
  std::map<std::string, std::vector<std::string>> children;  // by parent, in name order
  std::vector<std::string> top;
  for (const auto& [name, q] : queues) {
    const std::string parent = q.spec.value("parent", "");
    if (parent.empty()) {
      top.push_back(name);
    } else if (queues.count(parent) == 0) {
      out.problems[name] = "spec.parent: no Queue " + parent + " exists";
    } else {
      children[parent].push_back(name);
    }
  }
  // A queue from which following parents never reaches a top-level queue is in a cycle.
  for (const auto& [name, q] : queues) {
    std::set<std::string> seen;
    std::string at = name;
    while (!at.empty() && queues.count(at) != 0 && seen.insert(at).second) {
      at = queues.at(at).spec.value("parent", "");
    }
    if (!at.empty() && queues.count(at) != 0) {
      out.problems[name] = "spec.parent: the parents form a cycle through " + at;
    }
  }
  if (!out.problems.empty()) {
    out.error = "the Queue objects do not make a tree: " + out.problems.begin()->first + ": " +
                out.problems.begin()->second;
    return out;
  }
  if (top.empty()) {
    out.error = "no Queue objects";
    return out;
  }
  json doc = {{"queues", json::array()}};
  for (const std::string& name : top) {
    doc["queues"].push_back(queue_entry(name, queues.at(name).spec, children, queues));
  }
  try {
    QueueTree tree = parse_queue_tree_yaml(doc.dump(2), "Queue objects");
    tree.settings() = settings;
    out.tree = std::move(tree);
  } catch (const InputError& e) {
    out.error = e.what();
  }
  return out;
}

}  // namespace tessera::kube
