#include "sim/edge_simulation.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <unordered_map>

#include "engine/admission.h"
#include "engine/cycle.h"
#include "engine/policy.h"
#include "model/cluster_state.h"
#include "model/input_error.h"

namespace tessera {

void RequestTally::add(const RequestTally& o) {
  requests += o.requests;
  served += o.served;
  within_slo += o.within_slo;
  latency_ms_sum += o.latency_ms_sum;
}

int32_t packed_service_milli(const InferenceService& s, double headroom, double slowdown) {
  const double busy = s.request_rate * s.service_ms / 1000.0 * (1 + slowdown) * headroom;
  const double eighths = std::clamp(std::ceil(busy * 8.0 - 1e-9), 1.0, 8.0);
  return static_cast<int32_t>(eighths) * (kMilliPerGpu / 8);
}

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kEps = 1e-9;

enum class St : uint8_t { kFuture, kWaiting, kRunning, kDone, kRejected };

struct EJob {
  const JobSpec* spec = nullptr;
  const InferenceService* service = nullptr;
  std::optional<size_t> origin;  // a service's region's site
  St st = St::kFuture;
  int site = -1;
  Allocation alloc;
  double run_start = 0;
  double remaining = 0;  // a training job's work left at run_start
  double attained_gpu_seconds = 0;
  double queued_since = 0;
  // Why it waits (a cycle's reason, or SiteUnreachable: at its edge site for the main one);
  // nullopt while it runs, or before a cycle has looked at it.
  std::optional<PendingCode> reason;
  std::unique_ptr<bool[]> hosts;  // by site: could it ever host the job (admission)
  size_t result = 0;              // index into EdgeResult::services or ::jobs
  double window_end() const { return spec->submit_time + spec->work_seconds; }
};

// A job offered to one site's cycle, with the sites to try after it.
struct Candidate {
  size_t job = 0;
  std::vector<uint32_t> rest;
  bool migrating = false;     // running at the main site, offered to its edge site
  bool link_blocked = false;  // the main site was left out for its link
};

class EdgeSim {
 public:
  EdgeSim(const Sites& sites, const Workload& w, const EdgeOptions& opt)
      : sites_(sites), opt_(opt), policy_(make_policy(opt.policy, opt.seed)) {
    for (const Site& s : sites_.sites) {
      states_.emplace_back(s.cluster);
      QueueTree tree = s.queues ? *s.queues : QueueTree::flat(w.tenants);
      tree.bind(w.tenants, "the workload (site " + s.name + ")");
      trees_.push_back(std::move(tree));
      result_.sites.push_back(s.name);
    }
    result_.placement = std::string(to_string(opt.placement));
    result_.pack = opt.pack;
    result_.pack_headroom = opt.pack ? opt.pack_headroom : 0;
    result_.colocation_slowdown = opt.pack ? opt.colocation_slowdown : 0;
    result_.degraded_mbps = opt.degraded_mbps;
    result_.policy = opt.policy;
    jobs_.reserve(w.jobs.size());
    for (const JobSpec& j : w.jobs) {
      EJob e;
      e.spec = &j;
      const auto fail = [&](const std::string& field, const std::string& msg) {
        throw InputError(j.source.empty() ? "job " + j.name + ": " + field + ": " + msg
                                          : j.source + ": field " + field + ": " + msg);
      };
      if (j.work_seconds < 0) {
        fail("work", "an edge simulation needs each job's work (a service: how long it serves)");
      }
      if (!j.site.empty() && !sites_.find(j.site)) fail("site", "no site named " + j.site);
      if (j.service != kNoId) {
        e.service = &w.services[j.service];
        if (opt_.pack && j.min_members == 1 && j.max_members == 1 && j.demand.gpus == 1 &&
            j.demand.gpu_milli == kMilliPerGpu) {
          packed_.push_back(j);
          packed_.back().demand.gpu_milli =
              packed_service_milli(*e.service, opt_.pack_headroom, opt_.colocation_slowdown);
          e.spec = &packed_.back();
        }
        e.origin = sites_.find(e.service->region);
        if (!e.origin) fail("service.region", "no site named " + e.service->region);
        e.result = result_.services.size();
        EdgeServiceResult r;
        r.name = j.name;
        r.region = e.service->region;
        result_.services.push_back(r);
      } else {
        e.result = result_.jobs.size();
        EdgeJobResult r;
        r.name = j.name;
        r.submit = j.submit_time;
        result_.jobs.push_back(r);
      }
      e.remaining = j.work_seconds;
      e.hosts = std::make_unique<bool[]>(sites_.sites.size());
      for (size_t k = 0; k < sites_.sites.size(); ++k) {
        e.hosts[k] = !infeasible_reason(sites_.sites[k].cluster, j).has_value();
      }
      jobs_.push_back(std::move(e));
    }
  }

  EdgeResult run() {
    double t = 0;
    arrive(t);
    schedule(t);
    for (;;) {
      const double next = next_event(t);
      if (next == kInf) break;
      account(t, next);
      t = next;
      finish_due(t);
      arrive(t);
      schedule(t);
    }
    result_.end_time = t;
    for (const Site& s : sites_.sites) {
      result_.regions.emplace_back(s.name, RequestTally{});
      result_.regions_degraded.emplace_back(s.name, RequestTally{});
    }
    for (const EJob& j : jobs_) {
      if (j.service == nullptr) continue;
      const EdgeServiceResult& r = result_.services[j.result];
      result_.regions[*j.origin].second.add(r.tally);
      result_.regions_degraded[*j.origin].second.add(r.degraded);
      result_.total.add(r.tally);
      result_.degraded.add(r.degraded);
    }
    std::erase_if(result_.regions, [](const auto& r) { return r.second.requests == 0; });
    std::erase_if(result_.regions_degraded, [](const auto& r) { return r.second.requests == 0; });
    return std::move(result_);
  }

 private:
  // Sites as routing sees them at t, with the load the services running now put on links.
  std::vector<SiteView> views(double t) const {
    std::vector<SiteView> v = site_views(sites_, t);
    for (const EJob& j : jobs_) {
      if (j.st != St::kRunning || j.service == nullptr) continue;
      const size_t at = static_cast<size_t>(j.site);
      if (at == *j.origin) continue;
      const double mbps = link_mbps_of(*j.service);
      if (!v[*j.origin].main) v[*j.origin].link_load_mbps += mbps;
      if (!v[at].main) v[at].link_load_mbps += mbps;
    }
    return v;
  }

  bool meets(const EJob& j, const RequestOutcome& o) const {
    return o.reachable && o.served_fraction >= 1.0 && o.latency_ms <= j.service->latency_slo_ms;
  }

  // With packing: each GPU's services and utilisation (site << 32 | GPU), for the queueing.
  struct GpuLoad {
    int services = 0;
    double utilisation = 0;
  };
  static uint64_t gpu_key(int site, GpuId g) { return (static_cast<uint64_t>(site) << 32) | g; }
  double compute_slowdown(int sharing) const {
    return sharing > 1 ? 1.0 + opt_.colocation_slowdown : 1.0;
  }
  std::unordered_map<uint64_t, GpuLoad> gpu_loads() const {
    std::unordered_map<uint64_t, GpuLoad> load;
    for (const EJob& j : jobs_) {
      if (j.st != St::kRunning || j.service == nullptr) continue;
      for (const GpuShare& g : j.alloc.shares) ++load[gpu_key(j.site, g.gpu)].services;
    }
    for (const EJob& j : jobs_) {
      if (j.st != St::kRunning || j.service == nullptr) continue;
      for (const GpuShare& g : j.alloc.shares) {
        GpuLoad& l = load[gpu_key(j.site, g.gpu)];
        // A service on several GPUs spreads its requests over them.
        l.utilisation += j.service->request_rate * j.service->service_ms / 1000.0 *
                         compute_slowdown(l.services) / static_cast<double>(j.alloc.shares.size());
      }
    }
    return load;
  }
  // A packed service's compute on its (busiest) GPU: slowed by its neighbours, and queued
  // behind every request on it (processor sharing: compute / (1 - utilisation)).
  void charge_sharing(const EJob& j, const std::unordered_map<uint64_t, GpuLoad>& load,
                      RequestOutcome& o) const {
    GpuLoad worst;
    for (const GpuShare& g : j.alloc.shares) {
      const GpuLoad& l = load.at(gpu_key(j.site, g.gpu));
      if (l.utilisation >= worst.utilisation) worst = l;
    }
    const double compute = j.service->service_ms * compute_slowdown(worst.services);
    o.latency_ms -= j.service->service_ms;
    if (worst.utilisation < 0.99) {
      o.latency_ms += compute / (1.0 - worst.utilisation);
    } else {
      o.latency_ms += compute * kSaturatedFactor;
      o.served_fraction *= 1.0 / worst.utilisation;
    }
  }

  // Requests over [a, b): the links hold over it.
  void account(double a, double b) {
    if (b <= a) return;
    const std::vector<SiteView> v = views(a);
    const auto load = opt_.pack ? gpu_loads() : std::unordered_map<uint64_t, GpuLoad>{};
    for (EJob& j : jobs_) {
      if (j.st == St::kWaiting && j.reason) {
        result_.wait_seconds[static_cast<size_t>(*j.reason)] += b - a;
      }
      if (j.service == nullptr || j.st == St::kFuture) continue;
      const double lo = std::max(a, j.spec->submit_time), hi = std::min(b, j.window_end());
      if (hi <= lo) continue;
      EdgeServiceResult& r = result_.services[j.result];
      const SiteView& origin = v[*j.origin];
      const bool degraded =
          !origin.main && (!origin.link.up || origin.link.bandwidth_mbps < opt_.degraded_mbps);
      RequestTally add;
      add.requests = j.service->request_rate * (hi - lo);
      if (j.st == St::kRunning) {
        RequestOutcome o =
            request_outcome(*j.service, v, *j.origin, static_cast<size_t>(j.site), true);
        if (o.reachable && opt_.pack) charge_sharing(j, load, o);
        if (o.reachable) {
          add.served = add.requests * o.served_fraction;
          add.latency_ms_sum = add.served * o.latency_ms;
          if (o.latency_ms <= j.service->latency_slo_ms) add.within_slo = add.served;
        }
      }
      r.tally.add(add);
      if (degraded) r.degraded.add(add);
    }
  }

  double next_event(double t) const {
    double next = kInf;
    for (const EJob& j : jobs_) {
      switch (j.st) {
        case St::kFuture:
          next = std::min(next, j.spec->submit_time);
          break;
        case St::kWaiting:
          if (j.service != nullptr) next = std::min(next, j.window_end());
          break;
        case St::kRunning:
          next = std::min(next, j.service != nullptr ? j.window_end() : j.run_start + j.remaining);
          break;
        default:
          break;
      }
    }
    if (next == kInf) return kInf;  // nothing left to happen: link changes alone change nothing
    for (const Site& s : sites_.sites) next = std::min(next, s.next_change_after(t));
    return next;
  }

  void release(EJob& j) {
    states_[static_cast<size_t>(j.site)].release(j.alloc);
    j.alloc = Allocation{};
  }

  void finish_due(double t) {
    for (EJob& j : jobs_) {
      if (j.st != St::kRunning && j.st != St::kWaiting) continue;
      if (j.service != nullptr) {
        if (j.window_end() > t + kEps) continue;
        if (j.st == St::kRunning) release(j);
        j.st = St::kDone;
      } else if (j.st == St::kRunning && j.run_start + j.remaining <= t + kEps) {
        result_.jobs[j.result].end = j.run_start + j.remaining;
        release(j);
        j.st = St::kDone;
      }
    }
  }

  void arrive(double t) {
    for (EJob& j : jobs_) {
      if (j.st != St::kFuture || j.spec->submit_time > t + kEps) continue;
      j.st = St::kWaiting;
      j.queued_since = j.spec->submit_time;
    }
  }

  void reject(EJob& j, const std::string& why) {
    j.st = St::kRejected;
    result_.rejected.emplace_back(j.spec->name, why);
  }

  // Stops a running job (preempted), back to waiting.
  void stop(EJob& j, double t) {
    const double ran = t - j.run_start;
    if (j.service == nullptr) j.remaining = std::max(0.0, j.remaining - ran);
    j.attained_gpu_seconds += ran * static_cast<double>(j.alloc.gpu_milli()) / 1000.0;
    release(j);
    j.st = St::kWaiting;
    j.queued_since = t;
  }

  void start(EJob& j, size_t site, Allocation alloc, double t) {
    states_[site].allocate(alloc);
    j.alloc = std::move(alloc);
    j.site = static_cast<int>(site);
    j.st = St::kRunning;
    j.run_start = t;
    j.reason.reset();
    (sites_.sites[site].main ? result_.starts_at_main : result_.starts_at_edge) += 1;
    if (j.service != nullptr) {
      EdgeServiceResult& r = result_.services[j.result];
      if (r.first_start < 0) {
        r.first_start = t;
        r.first_site = sites_.sites[site].name;
      }
    } else {
      result_.jobs[j.result].site = sites_.sites[site].name;
    }
  }

  void schedule(double t) {
    const std::vector<SiteView> v = views(t);
    const size_t n = sites_.sites.size();
    std::vector<std::vector<Candidate>> lists(n);
    for (size_t i = 0; i < jobs_.size(); ++i) {
      EJob& j = jobs_[i];
      if (j.st == St::kWaiting) {
        const SiteRoute r = route_job(*j.spec, j.service, v, sites_.main, opt_.placement,
                                      std::span<const bool>(j.hosts.get(), n));
        if (r.status == RouteStatus::kNever) {
          reject(j, r.why);
          continue;
        }
        if (r.status == RouteStatus::kWait) {
          j.reason = PendingCode::kSiteUnreachable;
          continue;
        }
        lists[r.sites.front()].push_back(
            {i, std::vector<uint32_t>(r.sites.begin() + 1, r.sites.end()), false, r.link_blocked});
      } else if (j.st == St::kRunning && j.service != nullptr &&
                 opt_.placement == SitePolicy::kEdgeFirst &&
                 static_cast<size_t>(j.site) == sites_.main && *j.origin != sites_.main) {
        // Its users lost the main site (or it got too slow): move to their edge site when a
        // cycle there finds room.
        const RequestOutcome here = request_outcome(*j.service, v, *j.origin, sites_.main, true);
        const RequestOutcome edge = request_outcome(*j.service, v, *j.origin, *j.origin, false);
        if (!meets(j, here) && meets(j, edge) && j.hosts[*j.origin]) {
          lists[*j.origin].push_back({i, {}, true, true});
        }
      }
    }
    // Edge sites first, so that what finds no room there may still start at the main one.
    std::vector<size_t> order;
    for (size_t s = 0; s < n; ++s) {
      if (s != sites_.main) order.push_back(s);
    }
    order.push_back(sites_.main);
    for (const size_t s : order) {
      if (!lists[s].empty()) run_site_cycle(s, lists, t);
    }
  }

  void run_site_cycle(size_t s, std::vector<std::vector<Candidate>>& lists, double t) {
    const std::vector<Candidate> cands = std::move(lists[s]);
    lists[s].clear();
    std::vector<PendingJob> pending;
    for (const Candidate& c : cands) {
      const EJob& j = jobs_[c.job];
      PendingJob p;
      p.id = static_cast<JobId>(c.job);
      p.spec = j.spec;
      p.attained_gpu_seconds = j.attained_gpu_seconds;
      p.queued_since = c.migrating ? t : j.queued_since;
      pending.push_back(p);
    }
    std::vector<RunningJob> running;
    for (size_t i = 0; i < jobs_.size(); ++i) {
      const EJob& j = jobs_[i];
      if (j.st != St::kRunning || static_cast<size_t>(j.site) != s) continue;
      RunningJob r;
      r.id = static_cast<JobId>(i);
      r.spec = j.spec;
      r.alloc = &j.alloc;
      r.start_time = j.run_start;
      r.last_checkpoint = t;  // preempted jobs lose no work (they checkpoint on preemption)
      r.attained_gpu_seconds = j.attained_gpu_seconds;
      r.expected_end = j.service != nullptr ? j.window_end() : j.run_start + j.remaining;
      running.push_back(r);
    }
    Snapshot snap;
    snap.now = t;
    snap.cycle = ++cycle_;
    snap.state = &states_[s];
    snap.pending = pending;
    snap.running = running;
    snap.queues = &trees_[s];
    const Decisions d = schedule_cycle(snap, policy_);
    for (const Preemption& p : d.preemptions) {
      EJob& v = jobs_[p.job];
      if (v.st != St::kRunning) continue;
      stop(v, t);
      ++result_.preemptions;
      if (v.service != nullptr) ++result_.services[v.result].preemptions;
    }
    for (const Resize& r : d.resizes) {
      if (r.grow) continue;
      EJob& j = jobs_[r.job];
      states_[s].release(j.alloc);
      states_[s].allocate(r.alloc);
      j.alloc = r.alloc;
    }
    std::vector<bool> started(cands.size(), false);
    for (const Start& st : d.starts) {
      if (!states_[s].fits(st.alloc)) continue;
      const Candidate& c = cands[st.pending_index];
      EJob& j = jobs_[c.job];
      if (c.migrating) {
        if (j.st != St::kRunning) continue;
        release(j);
        ++result_.migrations;
        ++result_.services[j.result].migrations;
      } else if (j.st != St::kWaiting) {
        continue;
      }
      start(j, s, st.alloc, t);
      started[st.pending_index] = true;
    }
    for (const Resize& r : d.resizes) {
      if (!r.grow) continue;
      EJob& j = jobs_[r.job];
      if (j.st != St::kRunning || static_cast<size_t>(j.site) != s) continue;
      states_[s].release(j.alloc);
      if (!states_[s].fits(r.alloc)) {
        states_[s].allocate(j.alloc);
        continue;
      }
      states_[s].allocate(r.alloc);
      j.alloc = r.alloc;
    }
    std::unordered_map<JobId, PendingCode> why;
    for (const PendingReason& r : d.pending) why.emplace(r.job, r.code);
    for (size_t k = 0; k < cands.size(); ++k) {
      if (started[k]) continue;
      const Candidate& c = cands[k];
      if (c.migrating) continue;
      if (!c.rest.empty()) {
        lists[c.rest.front()].push_back({c.job,
                                         std::vector<uint32_t>(c.rest.begin() + 1, c.rest.end()),
                                         false, c.link_blocked});
      } else if (c.link_blocked && jobs_[c.job].service != nullptr) {
        jobs_[c.job].reason = PendingCode::kSiteUnreachable;
      } else if (const auto it = why.find(static_cast<JobId>(c.job)); it != why.end()) {
        jobs_[c.job].reason = it->second;
      }
    }
  }

  const Sites& sites_;
  const EdgeOptions& opt_;
  Policy policy_;
  std::vector<ClusterState> states_;
  std::vector<QueueTree> trees_;
  std::vector<EJob> jobs_;
  std::deque<JobSpec> packed_;  // services' specs as GPU shares (EdgeOptions::pack); stable
  uint64_t cycle_ = 0;
  EdgeResult result_;
};

nlohmann::ordered_json tally_json(const RequestTally& t) {
  return {{"requests", t.requests},
          {"served", t.served},
          {"within_slo", t.within_slo},
          {"slo_attainment", t.slo_attainment()},
          {"served_fraction", t.served_fraction()},
          {"mean_latency_ms", t.mean_latency_ms()}};
}

}  // namespace

EdgeResult run_edge_simulation(const Sites& sites, const Workload& w, const EdgeOptions& opt) {
  return EdgeSim(sites, w, opt).run();
}

nlohmann::ordered_json to_json(const EdgeResult& r) {
  nlohmann::ordered_json j;
  j["placement"] = r.placement;
  j["policy"] = r.policy;
  if (r.pack) {
    j["pack"] = {{"headroom", r.pack_headroom}, {"colocation_slowdown", r.colocation_slowdown}};
  }
  j["sites"] = r.sites;
  j["requests"] = tally_json(r.total);
  for (const auto& [name, t] : r.regions) {
    nlohmann::ordered_json x = tally_json(t);
    x["region"] = name;
    j["regions"].push_back(std::move(x));
  }
  j["degraded_mbps"] = r.degraded_mbps;
  j["degraded"] = tally_json(r.degraded);
  for (const auto& [name, t] : r.regions_degraded) {
    nlohmann::ordered_json x = tally_json(t);
    x["region"] = name;
    j["regions_degraded"].push_back(std::move(x));
  }
  j["starts"] = {{"edge", r.starts_at_edge}, {"main", r.starts_at_main}};
  j["migrations"] = r.migrations;
  j["preemptions"] = r.preemptions;
  j["site_unreachable_seconds"] = r.site_unreachable_seconds();
  nlohmann::ordered_json waits = nlohmann::ordered_json::object();
  for (size_t c = 0; c < kNumPendingCodes; ++c) {
    if (r.wait_seconds[c] > 0) waits[reason_code(static_cast<PendingCode>(c))] = r.wait_seconds[c];
  }
  j["wait_seconds_by_reason"] = std::move(waits);
  j["end_time"] = r.end_time;
  double jct = 0;
  int finished = 0;
  for (const EdgeJobResult& x : r.jobs) {
    if (x.end < 0) continue;
    jct += x.end - x.submit;
    ++finished;
  }
  j["jobs"] = {{"count", r.jobs.size()},
               {"finished", finished},
               {"mean_jct", finished > 0 ? jct / finished : 0.0}};
  auto services = nlohmann::ordered_json::array();
  for (const EdgeServiceResult& s : r.services) {
    nlohmann::ordered_json x = tally_json(s.tally);
    x["name"] = s.name;
    x["region"] = s.region;
    x["first_site"] = s.first_site;
    x["first_start"] = s.first_start;
    x["migrations"] = s.migrations;
    x["preemptions"] = s.preemptions;
    services.push_back(std::move(x));
  }
  j["services"] = std::move(services);
  auto rejected = nlohmann::ordered_json::array();
  for (const auto& [name, why] : r.rejected) rejected.push_back({{"job", name}, {"why", why}});
  j["rejected"] = std::move(rejected);
  return j;
}

}  // namespace tessera
