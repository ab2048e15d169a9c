// The read API's views of the Kubernetes scheduler (jobs, queues, nodes, metrics), each built
// under the model's lock from what the scheduler thread keeps.
#include <algorithm>

#include "control/kube/kube_scheduler.h"

namespace tessera::kube {

int64_t KubeScheduler::job_id(const std::string& gang_key) const {
  auto [it, inserted] = ids_.emplace(gang_key, next_id_);
  if (inserted) ++next_id_;
  return it->second;
}

JobView KubeScheduler::view_locked(const Gang& g) const {
  JobView v;
  JobRow& row = v.row;
  row.id = job_id(g.key);
  row.spec.name = model_.name_of(g);
  double submitted = 0, started = -1;
  int32_t members = 0;
  std::string queue = g.queue;
  std::optional<PriorityClass> named;
  v.kube.emplace();
  v.kube->ns = g.ns;
  for (const std::string& uid : g.pods) {
    auto it = model_.pods().find(uid);
    if (it == model_.pods().end()) continue;
    const PodInfo& p = it->second.info;
    if (queue.empty()) queue = p.queue;
    if (!named) named = p.priority;
    v.kube->names.push_back(p.name);
    if (v.kube->selector.empty()) v.kube->selector = group_selector(p);
    submitted = submitted == 0 ? p.created : std::min(submitted, p.created);
    ++members;
    // Members differ (a Ray head and its GPU workers): the largest, as the engine counts them.
    row.spec.gpus = members == 1 ? p.demand.gpus : std::max(row.spec.gpus, p.demand.gpus);
    row.spec.gpu_milli =
        members == 1 ? p.demand.gpu_milli : std::max(row.spec.gpu_milli, p.demand.gpu_milli);
    row.spec.cpu_milli = std::max(row.spec.cpu_milli, p.demand.cpu_milli);
    row.spec.mem_mib = std::max(row.spec.mem_mib, p.demand.mem_mib);
    if (it->second.slot && !p.node_name.empty()) {
      started = started < 0 ? p.bound_at : std::min(started, p.bound_at);
      MemberPlacement mp;
      mp.rank = static_cast<int32_t>(v.placement.size());
      mp.node = p.node_name;
      for (const GpuShare& s : it->second.slot->shares) {
        mp.gpus.push_back(model_.gpu_index(s.gpu));
        mp.gpu_milli = s.milli;
      }
      v.placement.push_back(std::move(mp));
    }
  }
  if (members == 0 && g.pending_id != kNoId) {
    // A suspended Job before its pods exist: as the engine is offered it (its template).
    row.spec.gpus = g.pending_spec.demand.gpus;
    row.spec.gpu_milli = g.pending_spec.demand.gpu_milli;
    row.spec.cpu_milli = g.pending_spec.demand.cpu_milli;
    row.spec.mem_mib = g.pending_spec.demand.mem_mib;
    members = g.pending_spec.max_members;
    submitted = g.pending_spec.submit_time;
    v.kube->selector = "batch.kubernetes.io/job-name=" + g.group;
  }
  row.tenant = queue;
  row.spec.tenant = queue;
  QueueId leaf = kNoId;
  if (const auto t = model_.tenants().find(queue)) {
    leaf = model_.tree().leaf_of(*t);
    if (leaf != kNoId) v.queue = model_.tree().queue(leaf).path;
  }
  // The class it is scheduled at: as the engine was offered it, else as its pods name it.
  if (g.pending_id != kNoId) {
    v.priority_class = to_string(g.pending_spec.priority);
  } else if (g.running_id != kNoId) {
    v.priority_class = to_string(g.running_spec.priority);
  } else if (named) {
    v.priority_class = to_string(*named);
  } else if (leaf != kNoId) {
    JobSpec s;  // waiting before the engine: the class its queue would give it
    apply_queue_defaults(model_.tree().queue(leaf), s);
    v.priority_class = to_string(s.priority);
  }
  row.spec.min_members = g.pending_spec.min_members;
  row.spec.max_members = members;
  row.submitted_at = submitted;
  row.started_at = started;
  row.power_limit_w = model_.power_limit(g);  // 0: the default (TDP)
  row.state =
      g.pending_pods.empty() && !g.bound_pods.empty() ? JobState::kRunning : JobState::kPending;
  if (row.state == JobState::kPending) {
    auto r = reasons_.find(g.key);
    if (!g.waiting.empty()) {
      v.pending_reason = g.waiting;
      v.reason_code = g.waiting_code;
    } else if (r != reasons_.end()) {
      const PendingReason& pr = r->second;
      v.reason_code = reason_code(pr.code);
      v.pending_reason = reason_words(
          pr, model_.cluster(),
          describe(pr, "",
                   pr.queue < model_.tree().size() ? model_.tree().queue(pr.queue).path : ""));
    }
  }
  return v;
}

std::vector<JobView> KubeScheduler::jobs(const JobFilter& f, const Namespaces& visible) const {
  std::lock_guard lock(mu_);
  std::vector<JobView> out;
  for (const auto& [key, g] : model_.gangs()) {
    if (visible && !visible->contains(g.ns)) continue;
    JobView v = view_locked(g);
    if (!f.wants(v.row.state)) continue;
    if (!f.tenant.empty() && v.row.tenant != f.tenant) continue;
    if (!f.in_queue(v.queue)) continue;
    if (!f.priority_class.empty() && v.priority_class != f.priority_class) continue;
    if (!f.reason.empty() && v.reason_code != f.reason) continue;
    if (f.newest_first ? (f.before > 0 && v.row.id >= f.before) : v.row.id <= f.after) continue;
    out.push_back(std::move(v));
  }
  std::sort(out.begin(), out.end(), [&](const JobView& a, const JobView& b) {
    return f.newest_first ? a.row.id > b.row.id : a.row.id < b.row.id;
  });
  if (f.limit > 0 && out.size() > f.limit) out.resize(f.limit);
  return out;
}

std::optional<JobView> KubeScheduler::job(int64_t id, const Namespaces& visible) const {
  std::lock_guard lock(mu_);
  // Ids are handed out on first sight, in the gangs' order: a link to a job must work before
  // anything listed the jobs.
  for (const auto& [key, g] : model_.gangs()) {
    if (job_id(key) != id) continue;
    if (visible && !visible->contains(g.ns)) return std::nullopt;
    return view_locked(g);
  }
  return std::nullopt;
}

std::vector<std::string> KubeScheduler::job_namespaces() const {
  std::lock_guard lock(mu_);
  std::set<std::string> out;
  for (const auto& [key, g] : model_.gangs()) out.insert(g.ns);
  return {out.begin(), out.end()};
}

std::vector<QueueView> KubeScheduler::queues() const {
  std::lock_guard lock(mu_);
  return queues_locked();
}

std::vector<QueueView> KubeScheduler::queues_locked() const {
  // What each queue holds now, and its fair share of the cluster.
  std::vector<PendingJob> pending;
  std::vector<RunningJob> running;
  std::vector<std::pair<int64_t, int64_t>> counts(model_.tenants().size());  // pending, running
  for (const auto& [key, g] : model_.gangs()) {
    if (g.pending_id != kNoId) {
      pending.push_back(PendingJob{g.pending_id, &g.pending_spec, 0, g.pending_spec.submit_time});
      ++counts[g.pending_spec.tenant].first;
    } else if (!g.pending_pods.empty()) {
      // Waiting before the engine (its PodGroup, its pods): pending all the same.
      const auto t = model_.tenants().find(g.queue);
      if (t) ++counts[*t].first;
    }
    if (g.running_id != kNoId) {
      RunningJob r;
      r.id = g.running_id;
      r.spec = &g.running_spec;
      r.alloc = &g.running_alloc;
      running.push_back(r);
      ++counts[g.running_spec.tenant].second;
    }
  }
  Snapshot snap;
  snap.now = now();
  snap.state = &model_.ledger();
  snap.pending = pending;
  snap.running = running;
  snap.queues = &model_.tree();
  const DecayedUsage& decayed = driver_.usage().decayed();
  snap.decayed_usage = decayed.view();
  return queue_views(snap, decayed, counts);
}

std::vector<NodeView> KubeScheduler::nodes() const {
  std::lock_guard lock(mu_);
  std::vector<NodeView> out =
      node_views(model_.ledger(), [&](GpuId g) { return model_.gpu_index(g); });
  // Which job (pod group) holds each GPU, as serve's nodes say (the dashboard's grid).
  const Cluster& c = model_.ledger().cluster();
  for (const auto& [key, g] : model_.gangs()) {
    const int64_t id = job_id(key);
    const std::string name = model_.name_of(g);
    for (const std::string& uid : g.pods) {
      const auto pod = model_.pods().find(uid);
      if (pod == model_.pods().end() || !pod->second.slot) continue;
      for (const GpuShare& s : pod->second.slot->shares) {
        const NodeId n = c.node_of_gpu(s.gpu);
        add_gpu_holder(out.at(n).gpus.at(s.gpu - c.node(n).first_gpu), id,
                       g.queue.empty() ? pod->second.info.queue : g.queue, name, s.milli);
      }
    }
  }
  sort_gpu_holders(out);
  return out;
}

ServiceMetrics KubeScheduler::metrics() const {
  std::lock_guard lock(mu_);
  ServiceMetrics m = counters_;
  driver_.report(m);
  std::map<std::string, ServiceMetrics::Tenant> by;
  for (TenantId t = 0; t < model_.tenants().size(); ++t)
    by[model_.tenants().name(t)].name = model_.tenants().name(t);
  for (const auto& [key, g] : model_.gangs()) {
    std::string q;
    for (const std::string& uid : g.pods) {
      auto it = model_.pods().find(uid);
      if (it != model_.pods().end()) {
        q = it->second.info.queue;
        break;
      }
    }
    if (q.empty()) continue;
    ServiceMetrics::Tenant& tn = by[q];
    tn.name = q;
    if (!g.pending_pods.empty()) {
      ++tn.pending;
      ++m.pending_jobs;
    }
    if (!g.bound_pods.empty()) {
      ++tn.running;
      ++m.running_jobs;
    }
    for (const std::string& uid : g.bound_pods) {
      auto it = model_.pods().find(uid);
      if (it == model_.pods().end() || !it->second.slot) continue;
      for (const GpuShare& s : it->second.slot->shares) tn.gpus_allocated += s.milli / 1000.0;
    }
  }
  for (auto& [name, tn] : by) m.tenants.push_back(tn);
  m.gpus_total = model_.cluster().num_gpus();
  m.gpus_allocated = static_cast<double>(model_.ledger().allocated_milli()) / 1000.0;
  // tessera_power_watts, as serve estimates it (no PUE; no per-GPU or per-tenant energy here).
  m.energy = true;
  m.power_watts = power_.draw_w(model_);
  return m;
}

KubeMetrics KubeScheduler::kube_metrics() const {
  std::lock_guard lock(mu_);
  KubeMetrics k = kube_counters_;
  k.api_errors = api_errors_.load() + writer_.api_errors();
  k.events += writer_.events();
  k.status_writes += writer_.status_writes();
  k.throttled = client_->throttled();
  const Informer::Stats watches = informer_.stats();
  k.relists += watches.relists;
  k.reconnects += watches.reconnects;
  k.watch_errors += watches.errors;
  k.leading = leading();
  return k;
}

// ---- the read API's view (ReadModel) ----

namespace {

KubeScheduler::Namespaces namespaces_of(const Reader& r) {
  if (r.everything) return std::nullopt;
  return r.owners;
}

void require_everything(const Reader& r, const char* what) {
  if (!r.everything) {
    throw ServiceError(ServiceError::kForbidden, "",
                       std::string(what) + " are the cluster's: for a reader of every namespace");
  }
}

}  // namespace

std::vector<JobView> KubeScheduler::jobs(const Reader& r, const JobFilter& f) const {
  return jobs(f, namespaces_of(r));
}

JobView KubeScheduler::job(const Reader& r, int64_t id) const {
  std::optional<JobView> v = job(id, namespaces_of(r));
  if (!v)
    throw ServiceError(ServiceError::kNotFound, "", "job " + std::to_string(id) + " not found");
  return std::move(*v);
}

std::vector<JobEvent> KubeScheduler::job_events(const Reader& r, int64_t id) const {
  const Namespaces visible = namespaces_of(r);
  std::string key;
  {
    std::lock_guard lock(mu_);
    for (const auto& [k, g] : model_.gangs()) {
      if (job_id(k) != id) continue;
      if (!visible || visible->contains(g.ns)) key = k;
      break;
    }
  }
  if (key.empty()) {
    throw ServiceError(ServiceError::kNotFound, "", "job " + std::to_string(id) + " not found");
  }
  return writer_.journal().of(key);
}

std::vector<QueueView> KubeScheduler::queues(const Reader& r) const {
  require_everything(r, "queues");
  return queues();
}

std::vector<NodeView> KubeScheduler::nodes(const Reader& r) const {
  require_everything(r, "nodes");
  return nodes();
}

std::vector<HistorySample> KubeScheduler::history(const Reader& r, double since, double until,
                                                  double step) const {
  require_everything(r, "the history's samples");
  return history(since, until, step);
}

}  // namespace tessera::kube
