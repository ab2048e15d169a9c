// Goodput rounds in `tessera kube --policy goodput` (docs/kubernetes.md, "Adaptive training"):
// adaptive pod groups report how they train, and every round (SchedulerOptions::goodput_round)
// the engine's goodput round chooses each group's members. A running group given another size
// is evicted whole (its checkpoint grace; its controller makes its pods again); a waiting one is
// offered to the cycle at its size, and its pods are bound with what they are to train with.
#include <algorithm>

#include "backend/kube/object_path.h"
#include "control/goodput_reports.h"
#include "control/kube/kube_scheduler.h"
#include "control/token.h"
#include "engine/goodput_placement.h"
#include "engine/goodput_round.h"
#include "engine/rng.h"

namespace tessera::kube {

using nlohmann::json;

GoodputModel& KubeScheduler::goodput_model(const Gang& g) {
  auto it = goodput_.find(g.key);
  if (it == goodput_.end())
    it = goodput_.emplace(g.key, GoodputModel(batch_limits(g.adaptive))).first;
  return it->second;
}

bool KubeScheduler::arriving(const Gang& g, double t) const {
  if (g.kept().round_members >= 0) return false;
  double newest = 0;
  for (const std::string& uid : g.pods) {
    if (auto it = model_.pods().find(uid); it != model_.pods().end()) {
      newest = std::max(newest, it->second.first_seen);
    }
  }
  return t - newest < opt_.adaptive_settle;
}

bool KubeScheduler::goodput_round_due(double t) const {
  if (!policy_.goodput) return false;
  // A new (or preempted) adaptive group is planned at once once its pods have arrived, not a
  // round later.
  return driver_.goodput_rounds().due(t, [&] {
    return std::any_of(model_.gangs().begin(), model_.gangs().end(), [&](const auto& e) {
      const Gang& g = e.second;
      return g.adaptive.batch > 0 && g.kept().round_members < 0 && g.round_spec.max_members > 0 &&
             !arriving(g, t);
    });
  });
}

bool KubeScheduler::goodput_round(double t) {
  // The last round's restarts first: until their old pods are gone and the new ones made, their
  // GPUs are neither theirs nor free (a controller that makes no new pods is waited for at most
  // gang_timeout; the round then plans the group with the pods it has).
  for (auto it = resizing_.begin(); it != resizing_.end();) {
    const Gang* g = model_.gang(it->first);
    const bool settled =
        g == nullptr ||
        (g->terminating_pods.empty() &&
         (!g->bound_pods.empty() ||
          static_cast<int32_t>(g->pending_pods.size()) >= std::max(1, g->kept().round_members) ||
          t - it->second >= opt_.gang_timeout));
    it = settled ? resizing_.erase(it) : std::next(it);
  }
  if (!resizing_.empty()) return false;
  driver_.goodput_rounds().began(t);
  ensure_report_secret();  // before any bind: the pods are told their token
  // Reports of groups that are gone are dropped with them.
  std::erase_if(goodput_, [&](const auto& e) { return model_.gang(e.first) == nullptr; });
  std::vector<Gang*> gangs;
  std::vector<GoodputRoundJob> jobs;
  for (const auto& [key, cg] : model_.gangs()) {
    Gang& g = *model_.gang(key);
    if (g.adaptive.batch <= 0 || g.round_spec.max_members <= 0 || arriving(g, t)) continue;
    GoodputRoundJob j;
    j.model = &goodput_model(g);
    j.spec = &g.round_spec;
    const bool running = g.running_id != kNoId;
    j.alloc = running ? &g.running_alloc : nullptr;
    j.run_seconds = running ? std::max(0.0, t - g.running_since) : 0.0;
    j.attained_gpu_seconds =
        running ? j.run_seconds * static_cast<double>(g.running_alloc.gpu_milli()) / 1000.0 : 0.0;
    gangs.push_back(&g);
    jobs.push_back(j);
  }
  if (gangs.empty()) return false;
  const uint64_t round = driver_.goodput_rounds().planned();
  const std::vector<int32_t> members =
      plan_goodput_round(jobs, model_.ledger(), *policy_.scorer, opt_.goodput,
                         mix_seed(policy_.seed, round), &model_.tree());
  bool changed = false;
  for (size_t k = 0; k < gangs.size(); ++k) {
    Gang& g = *gangs[k];
    const int32_t now_members = g.running_id != kNoId ? g.running_alloc.members() : 0;
    changed = changed || g.kept().round_members != members[k];
    model_.keep(g).round_members = members[k];
    if (now_members == 0 || members[k] == now_members) continue;
    // Running at another size from now: evicted whole (its checkpoint grace), to be bound
    // again at the new size once its controller has made its pods again.
    const int gpm = std::max(1, g.round_spec.demand.gpus);
    evict_pods(g.bound_pods, resize_message(now_members * gpm, members[k] * gpm, "groups"),
               grace_for(g));
    resizing_[g.key] = t;
    ++counters_.resizes;
    changed = true;
  }
  return changed;
}

bool KubeScheduler::ensure_report_secret() {
  if (!report_secret_.empty()) return true;
  const std::string name = opt_.lease.name + "-report";
  const std::string path = object_path(kSecrets, opt_.lease.ns, name);
  for (int attempt = 0; attempt < 2; ++attempt) {
    const Response r = client_->get(path);
    if (r.ok()) {
      const json s = r.json();
      if (s.contains("data") && s["data"].is_object() && s["data"].contains("secret") &&
          s["data"]["secret"].is_string() && !s["data"]["secret"].get<std::string>().empty()) {
        // The base64 text itself is the HMAC key: every replica reads the same.
        report_secret_ = s["data"]["secret"].get<std::string>();
        return true;
      }
      std::fprintf(stderr, "tessera kube: Secret %s/%s has no data.secret\n", opt_.lease.ns.c_str(),
                   name.c_str());
      return false;
    }
    if (r.status != 404) break;
    // 64 hex digits: valid base64 (of 48 random bytes), as Secret data must be.
    const json secret = {{"apiVersion", "v1"},
                         {"kind", "Secret"},
                         {"metadata",
                          {{"name", name},
                           {"namespace", opt_.lease.ns},
                           {"labels", {{"app.kubernetes.io/managed-by", "tessera"}}}}},
                         {"type", "Opaque"},
                         {"data", {{"secret", new_token()}}}};
    const Response c = client_->post(collection_path(kSecrets, opt_.lease.ns), secret);
    if (c.ok()) continue;           // read back what was stored
    if (c.status == 409) continue;  // another replica made it first: read theirs
    ++api_errors_;
    std::fprintf(stderr, "tessera kube: creating Secret %s/%s: %s\n", opt_.lease.ns.c_str(),
                 name.c_str(), c.describe().c_str());
    return false;
  }
  return !report_secret_.empty();
}

std::string KubeScheduler::report_token(const std::string& gang_key) const {
  return hmac_sha256_hex(report_secret_, "group-report:" + gang_key);
}

void KubeScheduler::add_goodput_annotations(const Gang& g, const Allocation& a, size_t member,
                                            json& annotations) {
  const int gpus = a.members() * std::max(1, a.gpus_per_member);
  const int nodes = std::max(1, nodes_of(a));
  const BatchSplit s = run_split(goodput_model(g), nodes, gpus);
  annotations[kWorldSizeAnnotation] = std::to_string(a.members());
  annotations[kRankAnnotation] = std::to_string(member);
  annotations[kGpusAnnotation] = std::to_string(gpus);
  annotations[kBatchSizeAnnotation] = std::to_string(s.batch(gpus));
  annotations[kMicroBatchAnnotation] = std::to_string(s.atomic_bsz);
  annotations[kAccumStepsAnnotation] = std::to_string(s.accum_steps);
  if (!report_secret_.empty()) annotations[kReportTokenAnnotation] = report_token(g.key);
}

JobReportView KubeScheduler::report(const std::string& ns, const std::string& group,
                                    const std::string& token, const JobReport& r) {
  std::lock_guard lock(mu_);
  if (!policy_.goodput) {
    throw ServiceError(ServiceError::kInvalid, "",
                       "this scheduler runs policy " + policy_.name() +
                           ": reports size groups only under --policy goodput");
  }
  if (!leading()) {
    throw ServiceError(ServiceError::kUnavailable, "",
                       "this replica is a standby: the leader takes reports; retry");
  }
  const std::string key = ns + "/" + group;
  // The token first: who may not report learns nothing of the group.
  if (report_secret_.empty() || token.empty() ||
      sha256_hex(token) != sha256_hex(report_token(key))) {
    throw ServiceError(ServiceError::kUnauthorized, "",
                       "missing or wrong bearer token (the group's tessera.io/report-token)");
  }
  const Gang* g = model_.gang(key);
  if (g == nullptr) {
    throw ServiceError(ServiceError::kNotFound, "", "no pod group " + key + " of ours");
  }
  if (g->adaptive.batch <= 0) {
    throw ServiceError(ServiceError::kInvalid, "adaptive",
                       "pod group " + key + " is not adaptive (no annotation " +
                           kAdaptiveBatchAnnotation + " on its pods)");
  }
  if (g->running_id == kNoId) {
    throw ServiceError(ServiceError::kConflict, "",
                       "pod group " + key + " is not running: a group reports while it runs");
  }
  const Allocation& a = g->running_alloc;
  const int gpm = std::max(1, a.gpus_per_member);
  GoodputModel& m = goodput_model(*g);
  take_report(
      m, r,
      ReportBounds{std::max(g->round_spec.max_members, a.members()) * gpm,
                   static_cast<int>(model_.cluster().nodes().size()), g->adaptive.max_per_gpu});
  JobReportView v = report_view(m, a.members() * gpm, std::max(1, nodes_of(a)),
                                g->kept().round_members < 0 ? -1 : g->kept().round_members * gpm);
  v.job = job_id(key);
  return v;
}

}  // namespace tessera::kube
