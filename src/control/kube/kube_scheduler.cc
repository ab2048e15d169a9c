#include "control/kube/kube_scheduler.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <variant>

#include "backend/kube/object_path.h"
#include "engine/cycle.h"
#include "engine/fair_share.h"

namespace tessera::kube {

namespace {

using nlohmann::json;

double wall_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

ModelOptions with_goodput(ModelOptions o, bool goodput) {
  o.goodput = goodput;
  return o;
}

std::string truncate(std::string s, size_t n) {
  if (s.size() > n) s.resize(n);
  return s;
}

void add_bucket(std::vector<uint64_t>& counts, const std::vector<double>& bounds, double v) {
  for (size_t b = 0; b < bounds.size(); ++b) {
    if (v <= bounds[b]) ++counts[b];
  }
}

}  // namespace

struct KubeScheduler::BindAttempt {
  std::string gang;
  int32_t need = 0;  // members this attempt must bind for the gang to be whole
  std::vector<std::string> uids;
  std::vector<std::string> nodes;  // where each member is bound (the watch may move the pod's
                                   // assumed node before the answer arrives)
  std::vector<int> status;
  std::vector<std::string> errors;
  size_t outstanding = 0;
};

// ---- lifecycle ----

KubeScheduler::KubeScheduler(std::shared_ptr<Client> client, SchedulerOptions opt)
    : client_(std::move(client)),
      opt_(std::move(opt)),
      policy_(make_policy(opt_.policy, opt_.seed)),
      driver_(policy_,
              CycleDriver::Options{opt_.reason_refresh,
                                   {0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5},
                                   opt_.goodput_round}),
      informer_(*client_, inbox_, [this] { return now(); }),
      writer_(*client_,
              {opt_.status_workers, opt_.status_qps, opt_.event_interval, opt_.reason_delay,
               opt_.reporting_instance},
              [this] { return now(); }),
      model_(with_goodput(opt_.model, policy_.goodput)),
      power_(opt_.power),
      history_(opt_.history_window),
      history_sampler_(wall_now()) {
  if (policy_.goodput && !(opt_.goodput_round > 0)) {
    throw std::invalid_argument("--goodput-round must be more than 0 seconds");
  }
  policy_.elastic = false;  // a pod group's size is its controller's, not the scheduler's
  check_power_options(opt_.power, policy_.elastic);
  policy_.power_shifting = opt_.power.shifting;
  kube_counters_.bind_bucket_bounds = {0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30};
  kube_counters_.bind_bucket_counts.assign(kube_counters_.bind_bucket_bounds.size(), 0);
  driver_.usage().reshape(model_.tree());
}

KubeScheduler::~KubeScheduler() {
  stop();
}

double KubeScheduler::now() const {
  return wall_now();
}

void KubeScheduler::start() {
  started_at_ = now();
  binder_ = std::make_unique<WorkQueue>(opt_.bind_workers);
  actions_ = std::make_unique<WorkQueue>(opt_.action_workers);
  writer_.start();
  informer_.start(stop_, opt_.model.queues_from_objects);
  if (opt_.usage_save_interval > 0) {
    usage_store_ =
        std::make_unique<UsageStore>(*client_, opt_.lease.ns, opt_.lease.name + "-usage");
  }
  if (opt_.leader_elect) {
    elector_ = std::make_unique<LeaderElector>(*client_, opt_.lease);
    threads_.emplace_back([this] { elector_->run(stop_); });
  }
  threads_.emplace_back([this] { run_loop(); });
}

void KubeScheduler::stop() {
  if (stop_.exchange(true)) return;
  inbox_.wake();
  informer_.join();
  for (std::thread& t : threads_) {
    if (t.joinable()) t.join();
  }
  threads_.clear();
  if (binder_) binder_->stop();
  if (actions_) actions_->stop();
  writer_.stop();
}

bool KubeScheduler::leading() const {
  return !opt_.leader_elect || (elector_ && elector_->leading());
}

bool KubeScheduler::synced() const {
  return listed_nodes_.load() && listed_pods_.load();
}

// ---- the scheduler thread ----

void KubeScheduler::run_loop() {
  while (!stop_.load()) {
    inbox_.wait(opt_.max_cycle_interval / 4, stop_);
    if (stop_.load()) break;
    // Let a burst of events (a Job creating its pods) arrive before deciding.
    std::this_thread::sleep_for(std::chrono::duration<double>(opt_.min_cycle_interval));
    {
      std::lock_guard lock(mu_);
      drain_inbox();
      drain_bind_results();
      if (queue_objects_changed_) apply_queue_objects();
      const bool lead = leading();
      kube_counters_.leading = lead;
      if (!lead) usage_loaded_ = false;  // the leader's saves are newer: read them on taking over
      const double t = now();
      if (lead && synced() && (model_.dirty() || t - last_cycle_ >= opt_.max_cycle_interval)) {
        run_cycle();
        last_cycle_ = t;
        if (!said_ready_) say_ready(t);
      }
    }
    // metrics() and queues() take the lock themselves.
    if (synced() && history_sampler_.due(now(), opt_.history_interval)) {
      history_.append(history_sampler_.next(now(), metrics(), queues()));
    }
  }
  // The last leader's usage outlives it (the elector may be giving the lease up meanwhile).
  std::lock_guard lock(mu_);
  if (kube_counters_.leading) save_usage(true);
}

// Once, after the first cycle: where the time from start to scheduling went (a restart in a big
// cluster is spent listing; an operator asks "why did it take 12 s").
void KubeScheduler::say_ready(double cycle_began) {
  said_ready_ = true;
  std::fprintf(stderr,
               "tessera kube: scheduling %.2f s after start: %zu nodes listed at %.2f s, %zu pods "
               "at %.2f s, the first cycle took %.3f s\n",
               now() - started_at_, model_.nodes().size(), nodes_listed_at_ - started_at_,
               model_.pods().size(), pods_listed_at_ - started_at_, now() - cycle_began);
}

void KubeScheduler::drain_inbox() {
  for (Inbox::Event& e : inbox_.take_events()) {
    switch (e.kind) {
      case Inbox::Kind::kNode:
        if (e.retain) {
          model_.retain_nodes(*e.retain);
          if (!listed_nodes_) nodes_listed_at_ = now();
          listed_nodes_ = true;  // the model holds a whole list now, not part of one
        } else if (e.removed) {
          model_.remove_node(e.key);
        } else {
          model_.upsert_node(std::get<NodeInfo>(std::move(e.object)));
        }
        break;
      case Inbox::Kind::kPod:
        if (e.retain) {
          model_.retain_pods(*e.retain);
          if (!listed_pods_) pods_listed_at_ = now();
          listed_pods_ = true;
        } else if (e.removed || std::get<PodInfo>(e.object).terminal()) {
          const PodInfo& p = std::get<PodInfo>(e.object);
          if (p.terminal() && model_.ours(p)) {
            ++counters_.completions;
            if (!p.group.empty()) {
              auto& [ok, bad] = done_[p.ns + "/" + p.group];
              ++(p.phase == "Succeeded" ? ok : bad);
            }
          }
          model_.remove_pod(e.key);
          writer_.forget_pod(e.key);
        } else {
          model_.upsert_pod(std::get<PodInfo>(std::move(e.object)), e.at);
        }
        break;
      case Inbox::Kind::kQueue:
        // Only a spec changes the tree (the scheduler's own status writes come back as
        // events too: they must not build it again).
        if (e.retain) {
          queue_objects_changed_ |= std::erase_if(queue_objects_, [&](const auto& q) {
                                      return e.retain->count(q.first) == 0;
                                    }) > 0;
        } else if (e.removed) {
          queue_objects_changed_ |= queue_objects_.erase(e.key) > 0;
        } else {
          QueueObject q = std::get<QueueObject>(std::move(e.object));
          auto [it, added] = queue_objects_.try_emplace(q.name, q);
          if (added || it->second.spec != q.spec) {
            it->second = std::move(q);
            queue_objects_changed_ = true;
          }
        }
        break;
      case Inbox::Kind::kGroup:
      case Inbox::Kind::kVolcanoGroup:
      case Inbox::Kind::kJob:
      case Inbox::Kind::kJobSet:
      case Inbox::Kind::kRayCluster:
        if (e.retain) {
          model_.retain_groups(Inbox::group_api(e.kind), *e.retain);
        } else if (e.removed) {
          model_.remove_group(e.key);
        } else {
          model_.upsert_group(std::get<PodGroupInfo>(std::move(e.object)));
        }
        break;
    }
  }
}

void KubeScheduler::drain_bind_results() {
  const double t = now();
  for (const Inbox::BindResult& r : inbox_.take_results()) {
    auto it = attempts_.find(r.attempt);
    if (it == attempts_.end()) continue;
    BindAttempt& a = it->second;
    a.status[r.member] = r.status;
    a.errors[r.member] = r.error;
    const std::string& uid = a.uids[r.member];
    const bool conflict = r.status == 409;
    // "already assigned": someone (a previous leader) bound it; the watch shows where.
    const bool bound_elsewhere = conflict && r.error.find("already assigned") != std::string::npos;
    if (r.status >= 200 && r.status < 300) {
      ++kube_counters_.binds_ok;
      if (PodRecord* p = model_.pod(uid)) {
        const double latency = t - p->first_seen;
        kube_counters_.bind_latency_sum += latency;
        add_bucket(kube_counters_.bind_bucket_counts, kube_counters_.bind_bucket_bounds, latency);
        writer_.post_event(p->info, "Normal", "Scheduled", "Binding",
                           "Successfully assigned " + p->info.key() + " to " + a.nodes[r.member]);
      }
    } else {
      ++kube_counters_.binds_failed;
      if (conflict) ++kube_counters_.binds_conflict;
      if (!bound_elsewhere) {
        // As kube-scheduler: the refused pod is told in the server's words (an admission
        // webhook or policy may have refused it).
        if (const PodRecord* p = model_.pod(uid)) {
          writer_.post_event(p->info, "Warning", "FailedScheduling", "Binding",
                             "binding rejected: " + truncate(r.error, 1024));
        }
        model_.forget(uid);
      }
    }
    if (--a.outstanding > 0) continue;
    // The whole attempt is in: a gang left short of its minimum gives its bound members back.
    int32_t bound = 0;
    std::vector<std::string> ok;
    for (size_t i = 0; i < a.uids.size(); ++i) {
      const bool fine = (a.status[i] >= 200 && a.status[i] < 300);
      const bool elsewhere =
          a.status[i] == 409 && a.errors[i].find("already assigned") != std::string::npos;
      if (fine) ok.push_back(a.uids[i]);
      if (fine || elsewhere) ++bound;
    }
    if (bound < a.need && !ok.empty()) {
      ++kube_counters_.gang_rollbacks;
      if (model_.gang(a.gang) != nullptr) {
        std::string why = "gang " + a.gang + " could not bind every member (";
        for (size_t i = 0; i < a.uids.size(); ++i) {
          if (a.status[i] < 200 || a.status[i] >= 300) {
            why += a.errors[i];
            break;
          }
        }
        evict_pods(ok, why + "); its bound members are evicted and it is tried again", 0);
      }
    }
    if (Gang* g = model_.gang(a.gang); g != nullptr && g->kept().attempts_in_flight > 0) {
      --model_.keep(*g).attempts_in_flight;
    }
    attempts_.erase(it);
    model_.mark_dirty();
  }
}

void KubeScheduler::run_cycle() {
  const double t = now();
  model_.refresh();
  CycleInput in = model_.prepare(t);
  roll_back_partial_gangs(t);
  // A round that changed a group's size changes what the cycle is offered.
  if (goodput_round_due(t) && goodput_round(t)) in = model_.prepare(t);
  LongTermUsage& usage = driver_.usage();
  if (usage.on()) {
    if (!usage_loaded_ && usage_store_) {
      std::string error;
      usage_restore_ = usage_store_->load(&error);
      if (!error.empty()) std::fprintf(stderr, "tessera kube: %s\n", error.c_str());
      usage_loaded_ = true;
    }
    carry_usage();
    // Long-term usage: what each leaf queue held since the last cycle, folded in.
    usage.fold(t);
    for (const RunningJob& r : in.running) {
      usage.hold(model_.tree(), model_.cluster(), *r.spec, *r.alloc);
    }
    if (opt_.usage_save_interval > 0 && t - usage_saved_at_ >= opt_.usage_save_interval) {
      save_usage(false);
      usage_saved_at_ = t;
    }
  }
  sync_queue(in);
  const CycleDriver::Cycle cycle = driver_.begin(t);
  Snapshot snap;
  snap.state = &model_.ledger();
  // The cycle runs under mu_ (no reader sees the ledger meanwhile): it tries its placements on
  // the model's own ledger and gives it back unchanged, rather than copying it.
  snap.scratch = &model_.ledger();
  snap.running = in.running;
  snap.queues = &model_.tree();
  snap.decayed_usage = usage.decayed().view();
  snap.power = power_.view(model_);
  // Data locality: the nodes labelled as holding each waiting gang's dataset.
  std::unordered_map<JobId, std::shared_ptr<const NodeSet>> preferred;
  for (const PendingJob& pj : in.pending) {
    const Gang& g = *in.gang_of(pj.id);
    if (g.dataset.empty()) continue;
    if (auto nodes = model_.data_nodes(g.dataset)) preferred.emplace(pj.id, std::move(nodes));
  }
  if (!preferred.empty()) {
    snap.preferred_nodes = &preferred;
    snap.locality_wait_seconds = opt_.locality_wait;
  }
  // On Unix time, as the pods' creation times and the clock.
  snap.carbon = power_.carbon();
  // With nothing pending a cycle decides nothing, except raising limits the power cap lowered
  // once power frees (shifting).
  const bool lowered = snap.power != nullptr && policy_.power_shifting &&
                       std::any_of(in.running.begin(), in.running.end(),
                                   [](const RunningJob& r) { return r.power_limit_w > 0; });
  const CycleDriver::Outcome outcome = driver_.decide(cycle, snap, !in.pending.empty() || lowered);
  driver_.settle(outcome);
  const Decisions& d = outcome.decisions;
  apply(d, in);
  ask_prestaging(in, d);
  write_status(in, d, t);
  writer_.write_group_status(model_, done_, t);
  if (opt_.model.queues_from_objects) write_queue_status(t);
}

// The gangs the model derived again (or lost) since the last cycle leave the queue and come
// back as they are now, wanting their reason; the rest stay as they were queued.
void KubeScheduler::sync_queue(const CycleInput& in) {
  auto enqueue = [&](JobId id, const Gang& g) {
    Queued& q = queued_[id] = Queued{g.pending_spec, g.key};
    driver_.queue().add(PendingJob{id, &q.spec, 0, q.spec.submit_time, true});
  };
  for (const JobId id : model_.take_changed()) {
    if (driver_.queue().contains(id)) {
      driver_.queue().remove(id);
      const auto it = queued_.find(id);
      reasons_.erase(it->second.key);
      queued_.erase(it);
    }
    const Gang* g = in.gang_of(id);
    if (g != nullptr && g->pending_id == id) enqueue(id, *g);
  }
  // Every gang offered is queued, and only those (a gang changes only through the model, which
  // reports it): a queue out of step would be a bug, so it is said and the queue built anew.
  if (driver_.queue().size() != in.pending.size()) {
    std::fprintf(stderr, "tessera kube: the kept queue holds %zu gangs, %zu are offered; rebuilt\n",
                 driver_.queue().size(), in.pending.size());
    driver_.reset_queue();
    queued_.clear();
    for (const PendingJob& pj : in.pending) enqueue(pj.id, *in.gang_of(pj.id));
  }
}

double KubeScheduler::grace_for(const Gang& g) const {
  for (const std::string& uid : g.pods) {
    auto it = model_.pods().find(uid);
    if (it != model_.pods().end() && it->second.info.checkpoint_grace >= 0) {
      return it->second.info.checkpoint_grace;
    }
  }
  const double tree = model_.tree().settings().checkpoint_grace_seconds;
  return tree >= 0 ? tree : opt_.checkpoint_grace;
}

void KubeScheduler::apply(const Decisions& d, const CycleInput& in) {
  std::map<JobId, std::vector<JobId>> victims_of;
  for (const Preemption& p : d.preemptions) victims_of[p.for_job].push_back(p.job);
  for (const Start& s : d.starts) {
    Gang& g = *in.gang_of(s.job);
    auto v = victims_of.find(s.job);
    if (v != victims_of.end()) {
      // A victim whose binds are still in flight is evicted only once they have landed (an
      // eviction must not race its own bind): decide again next cycle.
      const bool settling = std::any_of(v->second.begin(), v->second.end(),
                                        [&](JobId vj) { return in.gang_of(vj)->binding; });
      if (settling) {
        model_.mark_dirty();
        continue;
      }
      // The preemptor waits until its victims are gone: their GPUs are not free before.
      for (JobId vj : v->second) {
        Gang& victim = *in.gang_of(vj);
        model_.keep(victim).round_members = -1;  // an adaptive victim is planned afresh
        const TenantId q = g.pending_spec.tenant;
        evict_pods(victim.bound_pods,
                   "preempted by " + model_.name_of(g) + " (queue " +
                       (q < model_.tenants().size() ? model_.tenants().name(q) : "?") + ")",
                   grace_for(victim));
        model_.keep(g).waits_for.insert(victim.bound_pods.begin(), victim.bound_pods.end());
        ++counters_.preemptions;
      }
      continue;
    }
    if (!model_.ledger().fits(s.alloc)) {
      model_.mark_dirty();  // decided on capacity its victims still hold; decide again
      continue;
    }
    if (model_.admission_of(g) != nullptr) {
      admit_job(g, s);
      continue;
    }
    bind_gang(g, s);
  }
  // Running gangs' limits lowered to make room under the power cap, or raised as power freed.
  for (const PowerLimit& p : d.power_limits) {
    Gang* g = in.gang_of(p.job);
    if (g == nullptr || g->running_id != p.job) continue;
    write_power_limit(*g, p.limit_w);
  }
}

void KubeScheduler::write_power_limit(const Gang& g, double limit_w) {
  for (const std::string& uid : g.bound_pods) {
    PodRecord* r = model_.pod(uid);
    if (!r || r->evicting || !r->slot) continue;
    const double want = power_.annotated_limit(model_.cluster(), r->slot->node, limit_w);
    const double was = r->power_limit_w();
    if (std::abs(want - was) < 0.5) continue;
    model_.note_power_limit(uid, want);
    ++kube_counters_.power_limit_patches;
    const PodInfo p = r->info;
    // A merge patch of one annotation (null removes it: back to the default). Advisory: a node
    // agent applies it to the pod's GPUs (tessera.io/gpu-index) with nvidia-smi -pl.
    const json value = want > 0 ? json(fmt::format("{:.0f}", want)) : json(nullptr);
    const json body = {{"metadata", {{"annotations", {{kPowerLimitAnnotation, value}}}}}};
    actions_->push([this, p, body] {
      Response res = client_->patch(object_path(kPods, p.ns, p.name), body, PatchType::kMerge);
      if (!res.ok() && res.status != 404) {
        ++api_errors_;
        std::fprintf(stderr, "tessera kube: setting %s on %s/%s: %s\n", kPowerLimitAnnotation,
                     p.ns.c_str(), p.name.c_str(), res.describe().c_str());
      }
    });
    const std::string from = was > 0 ? fmt::format("{:.0f} W", was) : "the default (TDP)";
    const std::string to = want > 0 ? fmt::format("{:.0f} W", want) : "the default (TDP)";
    const bool lower = want > 0 && (was <= 0 || want < was);
    writer_.post_event(p, "Normal", "PowerLimit", "PowerLimit",
                       "GPU power limit " + from + " -> " + to +
                           (lower ? " to fit under the power cap" : ": power freed under the cap") +
                           " (annotation " + kPowerLimitAnnotation +
                           "; advisory, for a node agent to apply)");
  }
}

void KubeScheduler::ask_prestaging(const CycleInput& in, const Decisions& d) {
  if (opt_.prestage_datasets <= 0) return;
  std::set<JobId> started;
  for (const Start& st : d.starts) started.insert(st.job);
  std::set<std::string> wanted;  // datasets of gangs still waiting
  for (const PendingJob& pj : in.pending) {
    if (!started.contains(pj.id) && !in.gang_of(pj.id)->dataset.empty()) {
      wanted.insert(in.gang_of(pj.id)->dataset);
    }
  }
  // Asks answered (the node holds it now) are forgotten; moot ones (nobody waiting reads it:
  // its pods went or started elsewhere) are withdrawn from the node too, so that a data agent
  // does not stage what nobody wants.
  std::erase_if(stage_asked_, [&](const auto& kv) {
    const auto n = model_.nodes().find(kv.first);
    if (n == model_.nodes().end() || holds_dataset(n->second, kv.second)) return true;
    if (wanted.contains(kv.second)) return false;
    patch_stage_ask(kv.first, kv.second, nullptr);
    return true;
  });
  const Cluster& c = model_.cluster();
  const ClusterState& ledger = model_.ledger();
  const int per_node = std::max<int>(1, c.max_node_gpus());
  for (const PendingJob& pj : in.pending) {
    if (stage_asked_.size() >= static_cast<size_t>(opt_.prestage_datasets)) break;
    const Gang& g = *in.gang_of(pj.id);
    if (started.contains(pj.id) || g.dataset.empty()) continue;
    const JobSpec& s = *pj.spec;
    // The nodes it would span, less those that hold or are being given its dataset.
    int need = std::max(1, (std::max(1, s.demand.gpus) * s.min_members + per_node - 1) / per_node);
    std::vector<NodeId> candidates;
    for (NodeId id = 0; id < c.nodes().size() && need > 0; ++id) {
      const std::string& name = c.node(id).name;
      const auto asked = stage_asked_.find(name);
      if (holds_dataset(model_.nodes().at(name), g.dataset) ||
          (asked != stage_asked_.end() && asked->second == g.dataset)) {
        --need;
      } else if (asked == stage_asked_.end() &&
                 (s.eligible_nodes == nullptr || s.eligible_nodes->contains(id)) &&
                 (s.allowed_types == kAnyGpuType ||
                  ((s.allowed_types >> c.node(id).gpu_type) & 1u) != 0)) {
        candidates.push_back(id);
      }
    }
    // Where it is likely to start: the nodes with the most free GPUs.
    std::stable_sort(candidates.begin(), candidates.end(), [&](NodeId a, NodeId b) {
      return ledger.node_free_whole(a) > ledger.node_free_whole(b);
    });
    for (const NodeId id : candidates) {
      if (need <= 0 || stage_asked_.size() >= static_cast<size_t>(opt_.prestage_datasets)) break;
      const std::string node = c.node(id).name;
      stage_asked_[node] = g.dataset;
      --need;
      ++kube_counters_.stage_requests;
      patch_stage_ask(node, g.dataset, g.ns + "/" + g.group);
    }
  }
}

void KubeScheduler::patch_stage_ask(const std::string& node, const std::string& dataset,
                                    json value) {
  const bool withdraw = value.is_null();
  const json body = {
      {"metadata", {{"annotations", {{kStageAnnotationPrefix + dataset, std::move(value)}}}}}};
  actions_->push([this, node, body, withdraw] {
    Response res = client_->patch(object_path(kNodes, "", node), body, PatchType::kMerge);
    if (!res.ok() && res.status != 404) {
      ++api_errors_;
      std::fprintf(
          stderr, "tessera kube: %s node %s: %s\n",
          withdraw ? "withdrawing a dataset staging ask from" : "asking to stage a dataset on",
          node.c_str(), res.describe().c_str());
    }
  });
}

void KubeScheduler::bind_gang(Gang& g, const Start& s) {
  const Allocation& a = s.alloc;
  const size_t k = static_cast<size_t>(a.gpus_per_member);
  const uint64_t id = next_attempt_++;
  BindAttempt& att = attempts_[id];
  att.gang = g.key;
  att.need = g.pending_spec.min_members;
  ++counters_.starts;
  for (size_t m = 0; m < a.member_node.size() && m < g.pending_pods.size(); ++m) {
    const std::string& uid = g.pending_pods[m];
    PodRecord* r = model_.pod(uid);
    if (!r) continue;
    std::vector<GpuShare> shares(a.shares.begin() + static_cast<std::ptrdiff_t>(m * k),
                                 a.shares.begin() + static_cast<std::ptrdiff_t>((m + 1) * k));
    std::string index;
    for (const GpuShare& sh : shares) {
      if (!index.empty()) index += ",";
      index += std::to_string(model_.gpu_index(sh.gpu));
    }
    model_.assume(uid, a.member_node[m], shares);
    // Its GPUs' power limit (power policies): on the Binding, which the API server copies
    // onto the pod with the GPU index, so that a node agent finds both on the pod.
    const double limit =
        power_.annotated_limit(model_.cluster(), a.member_node[m], s.power_limit_w);
    if (limit > 0) model_.note_power_limit(uid, limit);
    json binding = {
        {"apiVersion", "v1"},
        {"kind", "Binding"},
        {"metadata", {{"name", r->info.name}, {"namespace", r->info.ns}, {"uid", uid}}},
        {"target", {{"apiVersion", "v1"}, {"kind", "Node"}, {"name", r->assumed_node}}}};
    if (!index.empty()) binding["metadata"]["annotations"] = {{kGpuIndexAnnotation, index}};
    if (g.adaptive.batch > 0 && policy_.goodput) {
      add_goodput_annotations(g, a, m, binding["metadata"]["annotations"]);
    }
    if (limit > 0) {
      binding["metadata"]["annotations"][kPowerLimitAnnotation] = fmt::format("{:.0f}", limit);
    }
    const size_t member = att.uids.size();
    att.uids.push_back(uid);
    att.nodes.push_back(r->assumed_node);
    att.status.push_back(0);
    att.errors.emplace_back();
    ++att.outstanding;
    const std::string path = object_path(kPods, r->info.ns, r->info.name, "binding");
    binder_->push([this, id, member, path, body = std::move(binding)] {
      // At most once per pod: a bind that got no answer is not retried blindly; the watch
      // tells whether it landed, and the gang is decided again.
      Response res = client_->post(path, body);
      Inbox::BindResult out;
      out.attempt = id;
      out.member = member;
      out.status = res.status;
      if (!res.ok()) out.error = res.describe();
      inbox_.push(std::move(out));
    });
  }
  if (att.uids.empty()) {
    attempts_.erase(id);
  } else {
    ++model_.keep(g).attempts_in_flight;  // until drain_bind_results has every answer
  }
}

void KubeScheduler::evict_pods(const std::vector<std::string>& uids, const std::string& why,
                               double grace) {
  for (const std::string& uid : uids) {
    PodRecord* r = model_.pod(uid);
    if (!r) continue;
    model_.mark_evicting(uid);
    ++kube_counters_.evictions;
    const PodInfo p = r->info;
    const auto grace_s = static_cast<int64_t>(std::max(0.0, grace));
    actions_->push([this, p, why, grace_s,
                    event = writer_.event_body(p, "Normal", "Preempted", "Preempting", why)] {
      // The reason first, in order (a scheduler killed before the eviction loses nothing):
      // the Preempted event, then, as kube-scheduler, the DisruptionTarget condition, then the
      // eviction (the Eviction API honours PodDisruptionBudgets; the grace is the checkpoint
      // grace).
      if (!client_->post(collection_path(kEvents, p.ns), event).ok()) ++api_errors_;
      json cond = {{"status",
                    {{"conditions",
                      {{{"type", "DisruptionTarget"},
                        {"status", "True"},
                        {"reason", "PreemptionByScheduler"},
                        {"message", truncate(why, 1024)},
                        {"lastTransitionTime", format_time(wall_now())}}}}}}};
      Response c = client_->patch(object_path(kPods, p.ns, p.name, "status"), cond,
                                  PatchType::kStrategicMerge);
      if (!c.ok() && c.status != 404) ++api_errors_;
      json ev = {{"apiVersion", "policy/v1"},
                 {"kind", "Eviction"},
                 {"metadata", {{"name", p.name}, {"namespace", p.ns}}},
                 {"deleteOptions",
                  {{"gracePeriodSeconds", grace_s}, {"preconditions", {{"uid", p.uid}}}}}};
      for (int attempt = 0; attempt < 30 && !stop_.load(); ++attempt) {
        Response e = client_->post(object_path(kPods, p.ns, p.name, "eviction"), ev);
        if (e.ok() || e.status == 404 || e.status == 409) return;  // done, or already gone
        ++api_errors_;
        if (e.status != 429 && e.status != 0 && e.status < 500) {
          std::fprintf(stderr, "tessera kube: evicting %s/%s: %s\n", p.ns.c_str(), p.name.c_str(),
                       e.describe().c_str());
          return;
        }
        std::this_thread::sleep_for(std::chrono::seconds(1));  // a PDB, or the server is busy
      }
    });
  }
}

void KubeScheduler::roll_back_partial_gangs(double t) {
  for (const auto& [key, g] : model_.gangs()) {
    if (g.kept().partial_since <= 0 || t - g.kept().partial_since < opt_.gang_timeout) continue;
    Gang* mg = model_.gang(key);
    std::vector<std::string> bound = mg->bound_pods;
    model_.keep(*mg).partial_since = 0;
    if (bound.empty()) continue;
    ++kube_counters_.gang_rollbacks;
    evict_pods(bound,
               "gang " + key + " stayed partly bound for " +
                   std::to_string(static_cast<int>(opt_.gang_timeout)) +
                   " s; its bound members are evicted so that it can start whole",
               0);
  }
}

void KubeScheduler::carry_usage() {
  const QueueTree& tree = model_.tree();
  LongTermUsage& usage = driver_.usage();
  if (usage.decayed().view().size() != tree.size()) usage.reshape(tree);
  apply_usage(tree, usage_restore_, usage.decayed());
}

UsageByPath KubeScheduler::usage_to_save() const {
  UsageByPath out = usage_restore_;  // saved, for queues not seen since: kept, not forgotten
  for (auto& [path, v] : usage_by_path(model_.tree(), driver_.usage().decayed())) out[path] = v;
  return out;
}

// `synchronously`: on this thread (the way out); else queued behind the other writes.
void KubeScheduler::save_usage(bool synchronously) {
  if (!usage_store_ || !usage_loaded_ || !driver_.usage().on()) return;
  auto save = [this, usage = usage_to_save(), t = now()] {
    std::string error;
    if (!usage_store_->save(usage, t, &error)) {
      ++api_errors_;
      std::fprintf(stderr, "tessera kube: %s\n", error.c_str());
    }
  };
  if (synchronously) {
    save();
  } else {
    actions_->push(std::move(save));
  }
}

void KubeScheduler::write_status(const CycleInput& in, const Decisions& d, double t) {
  // Why each waiting gang waits, and the kind of reason: the words carry live numbers (GPUs
  // free) that change with every bind elsewhere, so a pod's condition is rewritten when the
  // kind changes, and otherwise at most every event_interval.
  std::map<const Gang*, StatusWriter::Why> why;
  for (const PendingReason& r : d.pending) {
    const Gang* g = in.gang_of(r.job);
    const Gang* b = in.gang_of(r.blocker);
    const std::string blocker = b != nullptr ? model_.name_of(*b) : "";
    const std::string queue =
        r.queue < model_.tree().size() ? model_.tree().queue(r.queue).path : "";
    // The kind leaves the blocker out: as the queue moves, each start names a new blocker
    // for every gang behind it, and rewriting them all would cost a write per waiting pod.
    why[g] = {std::string(to_string(r.code)) + " " + queue,
              reason_words(r, model_.cluster(), describe(r, blocker, queue))};
  }
  for (const auto& [key, g] : model_.gangs()) {
    if (!g.waiting.empty()) why[&g] = {g.waiting, g.waiting};
  }
  writer_.write_reasons(model_, why, t);
  // Each waiting gang keeps its latest reason (one that leaves the queue loses it: sync_queue).
  for (const PendingReason& r : d.pending) reasons_.insert_or_assign(in.gang_of(r.job)->key, r);
}

}  // namespace tessera::kube
