// Queue objects (--queues-from crd): the queue tree from Tessera's Queue custom resources,
// built again whenever one changes, and each Queue's status written back.
#include <fmt/format.h>

#include <cstdio>

#include "backend/kube/object_path.h"
#include "control/kube/kube_scheduler.h"

namespace tessera::kube {

using nlohmann::json;

void KubeScheduler::apply_queue_objects() {
  queue_objects_changed_ = false;
  const bool was_accepted = queue_build_.error.empty();
  queue_build_ = build_queue_tree(queue_objects_, model_.tree().settings());
  // The condition's transition time moves only when it turns.
  if (queue_build_at_ == 0 || was_accepted != queue_build_.error.empty()) queue_build_at_ = now();
  if (!queue_build_.tree) {
    // The last good tree stays in force; each Queue's status says why (Accepted=False).
    std::fprintf(stderr,
                 "tessera kube: the Queue objects were not taken (the last tree stays): %s\n",
                 queue_build_.error.c_str());
    return;
  }
  // Long-term usage follows queues by path across the change.
  usage_restore_ = usage_to_save();
  model_.set_queue_tree(std::move(*queue_build_.tree), "Queue objects");
  queue_build_.tree.reset();
  driver_.usage().reshape(model_.tree());
  carry_usage();
  std::fprintf(stderr, "tessera kube: queue tree from %zu Queue objects\n", queue_objects_.size());
}

void KubeScheduler::write_queue_status(double t) {
  if (t - queue_status_at_ < opt_.queue_status_interval) return;
  queue_status_at_ = t;
  std::map<std::string, QueueView> by_path;
  for (QueueView& v : queues_locked()) by_path[v.path] = std::move(v);
  const bool accepted = queue_build_.error.empty();
  for (const auto& [name, q] : queue_objects_) {
    // The queue's path in the tree in force: its name under its parents'.
    std::string path = name;
    for (std::string at = q.spec.value("parent", ""); !at.empty() && path.size() < 4096;) {
      path = at + "/" + path;
      const auto p = queue_objects_.find(at);
      at = p == queue_objects_.end() ? "" : p->second.spec.value("parent", "");
    }
    json status = {{"path", path}};
    if (const auto v = by_path.find(path); v != by_path.end()) {
      const QueueView& qv = v->second;
      status["fairShareGpus"] = qv.fair_share_gpus;
      status["allocatedGpus"] = qv.holds_gpus;
      status["borrowedGpus"] = std::max(0.0, qv.holds_gpus - qv.guarantee_gpus);
      status["pendingGangs"] = qv.pending_jobs;
      status["runningGangs"] = qv.running_jobs;
      status["decayedUsageGpuHours"] = qv.decayed_gpus;
    }
    const auto problem = queue_build_.problems.find(name);
    const std::string message = problem != queue_build_.problems.end() ? problem->second
                                : accepted                             ? "in force"
                                                                       : queue_build_.error;
    status["conditions"] = json::array({{{"type", "Accepted"},
                                         {"status", accepted ? "True" : "False"},
                                         {"reason", accepted ? "TreeBuilt" : "TreeRefused"},
                                         {"message", message.substr(0, 1024)},
                                         {"observedGeneration", q.generation},
                                         {"lastTransitionTime", format_time(queue_build_at_)}}});
    std::string text = status.dump();
    std::string& sent = queue_status_sent_[name];
    if (sent == text) continue;
    sent = std::move(text);
    actions_->push([this, path = object_path(kTesseraQueues, "", name, "status"),
                    body = json{{"status", std::move(status)}}] {
      const Response res = client_->patch(path, body, PatchType::kMerge);
      if (!res.ok() && res.status != 404) ++api_errors_;
    });
  }
  std::erase_if(queue_status_sent_,
                [&](const auto& s) { return queue_objects_.count(s.first) == 0; });
}

}  // namespace tessera::kube
