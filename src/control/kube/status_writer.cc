#include "control/kube/status_writer.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>

#include "backend/kube/object_path.h"
#include "control/kube/kube_objects.h"

namespace tessera::kube {

using nlohmann::json;

namespace {

const PodRecord* find_pod(const ClusterModel& model, const std::string& uid) {
  auto it = model.pods().find(uid);
  return it == model.pods().end() ? nullptr : &it->second;
}

}  // namespace

StatusWriter::StatusWriter(Client& client, StatusWriterOptions opt, std::function<double()> now)
    : client_(client), opt_(std::move(opt)), now_(std::move(now)) {}

void StatusWriter::start() {
  status_ = std::make_unique<WorkQueue>(opt_.workers, opt_.qps,
                                        static_cast<int>(std::max(1.0, opt_.qps)));
  events_ =
      std::make_unique<WorkQueue>(1, opt_.qps / 2, static_cast<int>(std::max(1.0, opt_.qps / 2)));
}

void StatusWriter::stop() {
  if (status_) status_->stop();
  if (events_) events_->stop();
}

json StatusWriter::event_body(const PodInfo& p, const std::string& type, const std::string& reason,
                              const std::string& action, const std::string& note) {
  journal_.add(p.gang_key(), now_(), reason,
               p.group.empty() ? note : "pod " + p.name + ": " + note);
  return event_about({{"apiVersion", "v1"},
                      {"kind", "Pod"},
                      {"namespace", p.ns},
                      {"name", p.name},
                      {"uid", p.uid}},
                     type, reason, action, note);
}

json StatusWriter::event_about(const json& regarding, const std::string& type,
                               const std::string& reason, const std::string& action,
                               const std::string& note) {
  ++events_made_;
  // Named as client-go's recorder names them, NAME.<unix nanoseconds in hex>: the API server
  // refuses generateName "NAME." (a name may not end in '.'). Strictly increasing, so two
  // events of one object never share a name; the object's part is cut to keep a valid length.
  const int64_t nanos = std::chrono::duration_cast<std::chrono::nanoseconds>(
                            std::chrono::system_clock::now().time_since_epoch())
                            .count();
  int64_t last = last_event_nanos_.load();
  int64_t stamp;
  do {
    stamp = std::max(nanos, last + 1);
  } while (!last_event_nanos_.compare_exchange_weak(last, stamp));
  const std::string object = regarding.value("name", "");
  const std::string ns = regarding.value("namespace", "");
  const std::string name = fmt::format("{}.{:x}", object.substr(0, 253 - 17), stamp);
  return {{"apiVersion", "events.k8s.io/v1"},
          {"kind", "Event"},
          {"metadata", {{"name", name}, {"namespace", ns}}},
          {"eventTime", format_micro_time(now_())},
          {"type", type},
          {"reason", reason},
          {"action", action},
          {"note", note.substr(0, 1024)},
          {"reportingController", "tessera.io/scheduler"},
          {"reportingInstance", opt_.reporting_instance},
          {"regarding", regarding}};
}

void StatusWriter::post_job_event(const PodGroupInfo& job, const std::string& reason,
                                  const std::string& action, const std::string& note) {
  journal_.add(job.gang_key(), now_(), reason, note);
  json body = event_about({{"apiVersion", "batch/v1"},
                           {"kind", "Job"},
                           {"namespace", job.ns},
                           {"name", job.name},
                           {"uid", job.uid}},
                          "Normal", reason, action, note);
  status_->push([this, path = collection_path(kEvents, job.ns), body = std::move(body)] {
    if (!client_.post(path, body).ok()) ++api_errors_;
  });
}

void StatusWriter::post(const PodInfo& p, json body, WorkQueue& queue) {
  queue.push([this, path = collection_path(kEvents, p.ns), body = std::move(body)] {
    if (!client_.post(path, body).ok()) ++api_errors_;
  });
}

void StatusWriter::post_event(const PodInfo& p, const std::string& type, const std::string& reason,
                              const std::string& action, const std::string& note) {
  post(p, event_body(p, type, reason, action, note), *status_);
}

void StatusWriter::forget_pod(const std::string& uid) {
  written_.erase(uid);
  held_.erase(uid);
}

void StatusWriter::write_reasons(const ClusterModel& model, const std::map<const Gang*, Why>& why,
                                 double t) {
  for (const auto& [g, reason] : why) {
    // A pod of no group is named as itself; a gang by its group and how many wait.
    const PodRecord* lone = g->group.empty() && g->pending_pods.size() == 1
                                ? find_pod(model, g->pending_pods.front())
                                : nullptr;
    const std::string msg = (lone ? "pod " + lone->info.key()
                                  : "gang " + g->key + " (" +
                                        std::to_string(g->pending_pods.size()) + " pending pods)") +
                            ": " + reason.text;
    for (const std::string& uid : g->pending_pods) {
      const PodRecord* r = find_pod(model, uid);
      if (!r) continue;
      Written& w = written_[uid];
      const bool new_kind = w.kind != reason.kind;
      const bool due = w.message != msg && t - w.at >= opt_.event_interval;
      if (!new_kind) w.held_kind.clear();  // back to what the pod already says
      if (!new_kind && !due) continue;
      if (new_kind && opt_.reason_delay > 0) {
        // Said once it has held reason_delay: a pod placed within it (binds in flight, a
        // gang's pods still being created) gets no condition and no event.
        if (w.held_kind != reason.kind) {
          w.held_kind = reason.kind;
          w.held_since = t;
        }
        w.held_message = msg;
        held_.insert(uid);
        continue;
      }
      say_why(*r, w, reason.kind, msg, t);
    }
  }
  for (auto it = held_.begin(); it != held_.end();) {
    const PodRecord* r = find_pod(model, *it);
    auto w = written_.find(*it);
    if (!r || w == written_.end() || w->second.held_kind.empty() || !r->info.node_name.empty() ||
        !r->assumed_node.empty()) {
      if (w != written_.end()) w->second.held_kind.clear();
      it = held_.erase(it);
      continue;
    }
    if (t - w->second.held_since < opt_.reason_delay) {
      ++it;
      continue;
    }
    const std::string kind = std::move(w->second.held_kind);
    w->second.held_kind.clear();
    say_why(*r, w->second, kind, w->second.held_message, t);
    it = held_.erase(it);
  }
}

void StatusWriter::say_why(const PodRecord& r, Written& w, const std::string& kind,
                           const std::string& msg, double t) {
  w.kind = kind;
  w.message = msg;
  w.at = t;
  if (r.info.unschedulable_message != msg) {
    const PodInfo& p = r.info;
    json body = {{"status",
                  {{"conditions",
                    {{{"type", "PodScheduled"},
                      {"status", "False"},
                      {"reason", "Unschedulable"},
                      {"message", msg},
                      {"lastTransitionTime", format_time(now_())}}}}}}};
    const std::string path = object_path(kPods, p.ns, p.name, "status");
    ++status_writes_;
    status_->push([this, path, body = std::move(body)] {
      Response res = client_.patch(path, body, PatchType::kStrategicMerge);
      if (!res.ok() && res.status != 404) ++api_errors_;
    });
  }
  // One FailedScheduling event when the reason changes, then at most every event_interval.
  post(r.info, event_body(r.info, "Warning", "FailedScheduling", "Scheduling", msg), *events_);
}

void StatusWriter::write_group_status(
    const ClusterModel& model, const std::map<std::string, std::pair<int32_t, int32_t>>& done,
    double t) {
  for (const auto& [key, info] : model.groups()) {
    // A workload's status (a Job's, a JobSet's...) is its controller's: PodGroups only.
    if (info.api != GroupApi::kSchedulerPlugins && info.api != GroupApi::kVolcano) continue;
    auto gi = model.gangs().find(info.gang_key());
    // Only the groups of our gangs (or whose pods of ours finished): another scheduler's
    // (Volcano's own, scheduler-plugins') status is theirs to write.
    const Gang* g = gi == model.gangs().end() ? nullptr : &gi->second;
    if (g == nullptr && done.count(info.gang_key()) == 0) continue;
    int32_t scheduled = 0, running = 0;
    if (g) {
      for (const std::string& uid : g->bound_pods) {
        ++scheduled;
        const PodRecord* p = find_pod(model, uid);
        if (p != nullptr && p->info.phase == "Running") ++running;
      }
    }
    auto d = done.find(info.gang_key());
    const int32_t succeeded = std::max(info.succeeded, d == done.end() ? 0 : d->second.first);
    const int32_t failed = std::max(info.failed, d == done.end() ? 0 : d->second.second);
    std::string phase = "Pending";
    if (failed > 0 && running + succeeded < info.min_member) {
      phase = "Failed";
    } else if (succeeded >= info.min_member && running == 0) {
      phase = "Finished";
    } else if (running + succeeded >= info.min_member) {
      phase = "Running";
    } else if (scheduled > 0) {
      phase = "Scheduling";
    }
    if (info.api == GroupApi::kVolcano) {
      // Volcano's phases: Pending, Inqueue (admitted), Running, Completed, Unknown.
      phase = phase == "Scheduling" ? "Inqueue"
              : phase == "Finished" ? "Completed"
              : phase == "Failed"   ? "Unknown"
                                    : phase;
    }
    json status = {{"phase", phase},
                   {"scheduled", scheduled},
                   {"running", running},
                   {"succeeded", succeeded},
                   {"failed", failed}};
    // Written once it has held reason_delay (a gang that binds and runs within it is written
    // once, Running, not at every bind and start), and at least every event_interval / 10
    // while it keeps changing.
    const std::string text = status.dump();
    GroupWritten& w = group_status_[key];
    if (w.sent == text) {
      w.held.clear();
      continue;
    }
    if (w.held != text) {
      if (w.held.empty()) w.first_held = t;
      w.held = text;
      w.held_since = t;
    }
    if (t - w.held_since < opt_.reason_delay &&
        t - w.first_held < std::max(opt_.reason_delay, opt_.event_interval / 10)) {
      continue;
    }
    w.sent = text;
    w.held.clear();
    const std::string path =
        object_path(info.api == GroupApi::kVolcano ? kPodGroupsVolcano : kPodGroupsX, info.ns,
                    info.name, "status");
    ++status_writes_;
    status_->push([this, path, body = json{{"status", status}}] {
      Response res = client_.patch(path, body, PatchType::kMerge);
      if (!res.ok() && res.status != 404) ++api_errors_;
    });
  }
}

}  // namespace tessera::kube
