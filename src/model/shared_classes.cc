// Which priority classes a queue grants where tenants share a cluster (tessera serve and
// tessera kube): the rule and its refusal, apart from the tree's reading and checking.
#include <string>

#include "model/queue_tree.h"

namespace tessera {

ClassMask shared_classes(const QueueSpec& leaf) {
  if (leaf.classes_given) return leaf.allowed_classes;
  const PriorityClass top = leaf.has_default_class ? leaf.default_class : PriorityClass::kResearch;
  return static_cast<ClassMask>((class_bit(top) << 1) - 1);  // top and every lower class
}

std::string class_refusal(const QueueSpec& leaf, PriorityClass p) {
  const ClassMask allowed = shared_classes(leaf);
  if ((allowed & class_bit(p)) != 0) return "";
  const std::string queue =
      leaf.path.empty() ? std::string("the root queue") : "queue " + leaf.path;
  return queue + " does not allow priority class " + std::string(to_string(p)) + " (it allows " +
         class_list(allowed) +
         (leaf.classes_given ? std::string(")")
                             : std::string("; a queue that lists no priority_classes allows its "
                                           "default class and lower ones)"));
}

}  // namespace tessera
