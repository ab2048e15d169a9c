#include "sim/colocation_experiment.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <stdexcept>

#include "insight/kmeans.h"

namespace tessera {

std::vector<ColocPolicy> standard_colocation_policies(double epsilon) {
  std::vector<ColocPolicy> out;
  out.push_back({"fcfs", ColocScheduler::kFcfs, {}});
  out.push_back({"random", ColocScheduler::kRandom, {}});
  auto rec = [&](std::string name, Objective o, Packing p, double eps, bool directed = false,
                 bool queue_aware = false) {
    RecommendOptions r;
    r.objective = o;
    r.packing = p;
    r.epsilon = eps;
    r.directed_exploration = directed;
    r.queue_aware = queue_aware;
    // Peak utilisation over 100 % slows jobs down but does not fail them: that bound is a
    // preference. Memory over 100 % would fail a job: that bound is strict.
    r.strict_packing = p == Packing::kMemory;
    out.push_back({name + "-greedy", ColocScheduler::kRecommend, r});
    r.opportunity_cost = true;
    out.push_back({name, ColocScheduler::kRecommend, r});
  };
  rec("balance", Objective::kBalance, Packing::kNone, 0);
  rec("min-indsd", Objective::kMinIndSD, Packing::kNone, 0);
  rec("min-indsd-eps", Objective::kMinIndSD, Packing::kNone, epsilon);
  rec("min-indsd-eps-dir", Objective::kMinIndSD, Packing::kNone, epsilon, true);
  rec("max-pacsav", Objective::kMaxPacSav, Packing::kGpuUtil, 0);
  rec("max-pacsav-mem", Objective::kMaxPacSav, Packing::kMemory, 0);
  rec("max-pacsav-eps", Objective::kMaxPacSav, Packing::kGpuUtil, epsilon);
  // Duration-aware (the jobs' estimated times alone).
  rec("max-pacsav-dur", Objective::kMaxPacSavDuration, Packing::kNone, 0, false, true);
  rec("max-pacsav-dur-mem", Objective::kMaxPacSavDuration, Packing::kMemory, 0, false, true);
  rec("max-pacsav-dur-pair", Objective::kMaxPacSavDuration, Packing::kNone, 0);
  rec("min-indsd-dur", Objective::kMinIndSDDuration, Packing::kNone, 0);
  rec("min-indsd-dur-eps", Objective::kMinIndSDDuration, Packing::kNone, epsilon, true);
  return out;
}

std::optional<ColocPolicy> find_colocation_policy(const std::string& name, double epsilon) {
  for (ColocPolicy& p : standard_colocation_policies(epsilon)) {
    if (p.name == name) return p;
  }
  return std::nullopt;
}

ColocWorld make_colocation_world(const InterferenceData& data, const KnowledgeBase& kb) {
  ColocWorld w;
  w.seeded = InterferenceModel(kb.k());
  for (const CatalogJob& j : data.jobs) {
    const ClusterAssignment a = kb.assign(j.features);
    w.jobs.push_back({a.cluster, a.uncertainty, j.features});
    w.alone_seconds.push_back(j.alone_seconds);
  }
  for (const MeasuredPair& p : data.pairs) {
    w.truth.set(p.a, p.b, p.speed_a, p.speed_b);
    const uint32_t ca = w.jobs[p.a].cluster, cb = w.jobs[p.b].cluster;
    if (p.pacsav >= 0) {
      w.seeded.observe(ca, cb, 1.0 / p.speed_a - 1.0, 1.0 / p.speed_b - 1.0, p.pacsav);
    } else {
      w.seeded.observe_speeds(ca, cb, p.speed_a, p.speed_b);
    }
  }
  return w;
}

std::vector<ColocJob> make_colocation_workload(const ColocWorld& world, const ColocOptions& opt,
                                               uint64_t seed) {
  if (world.jobs.empty()) throw std::invalid_argument("co-location workload: empty catalogue");
  if (!(opt.estimate_error >= 0)) throw std::invalid_argument("co-location: estimate error < 0");
  std::mt19937_64 rng(seed);
  // Estimate errors from their own stream: the same jobs and arrivals for every sigma.
  std::mt19937_64 noise(seed ^ 0x9e3779b97f4a7c15ULL);
  constexpr double kTwoPi = 6.283185307179586;
  std::vector<ColocJob> out;
  double t = 0;
  for (size_t i = 0; i < opt.jobs; ++i) {
    ColocJob j;
    j.catalog = static_cast<uint32_t>(uniform_below(rng, world.jobs.size()));
    const double u = uniform01(rng);
    j.work = world.alone_seconds[j.catalog] > 0 ? world.alone_seconds[j.catalog]
                                                : opt.min_work + u * (opt.max_work - opt.min_work);
    j.submit = t;
    t += -std::log(1.0 - uniform01(rng)) * opt.mean_interarrival;
    // Box-Muller on raw uniforms (no std:: distributions: the same numbers everywhere).
    const double u1 = uniform01(noise), u2 = uniform01(noise);
    const double z = std::sqrt(-2.0 * std::log(1.0 - u1)) * std::cos(kTwoPi * u2);
    j.estimate = j.work * std::exp(opt.estimate_error * z);
    out.push_back(j);
  }
  return out;
}

namespace {

struct Segment {
  uint32_t partner = 0;  // index into the workload
  double time = 0, work = 0;
};

struct JobState {
  double remaining = 0;
  double speed = 1;
  double est_done = 0;   // work done as the scheduler estimates it (at the model's pair speeds)
  double est_speed = 1;  // the model's speed for the current partners
  uint32_t episode = UINT32_MAX;
  uint32_t gpu = UINT32_MAX;
  bool done = false;
  std::vector<Segment> segments;
};

class Run {
 public:
  Run(const ColocWorld& w, std::span<const ColocJob> jobs, const ColocPolicy& p,
      const ColocOptions& o, uint64_t seed)
      : w_(w),
        jobs_(jobs),
        p_(p),
        o_(o),
        rng_(seed),
        model_(o.cold_start ? InterferenceModel(w.seeded.clusters()) : w.seeded),
        st_(jobs.size()),
        gpus_(o.gpus),
        busy_(o.gpus, 0) {
    if (o.gpus == 0 || o.slots == 0) throw std::invalid_argument("co-location: no GPU slots");
    res_.jobs.resize(jobs.size());
    for (size_t i = 0; i < jobs.size(); ++i) st_[i].remaining = jobs[i].work;
  }

  ColocRun go() {
    size_t next = 0, finished = 0;
    now_ = jobs_.empty() ? 0 : jobs_.front().submit;
    const size_t n = jobs_.size();
    while (finished < n) {
      while (next < n && jobs_[next].submit <= now_)
        queue_.push_back(static_cast<uint32_t>(next++));
      schedule();
      update_speeds();
      double t_next = next < n ? jobs_[next].submit : std::numeric_limits<double>::infinity();
      uint32_t first = UINT32_MAX;
      for (const auto& g : gpus_) {
        for (uint32_t j : g) {
          const double t = now_ + st_[j].remaining / st_[j].speed;
          if (t < t_next) {
            t_next = t;
            first = j;
          }
        }
      }
      if (!std::isfinite(t_next)) throw std::logic_error("co-location: no progress possible");
      advance(t_next - now_);
      now_ = t_next;
      if (first != UINT32_MAX) st_[first].remaining = 0;
      for (uint32_t g = 0; g < gpus_.size(); ++g) {
        for (size_t k = 0; k < gpus_[g].size();) {
          const uint32_t j = gpus_[g][k];
          if (st_[j].remaining <= 1e-9 * std::max(1.0, jobs_[j].work)) {
            finish(j, now_);
            gpus_[g].erase(gpus_[g].begin() + static_cast<std::ptrdiff_t>(k));
            ++finished;
          } else {
            ++k;
          }
        }
      }
    }
    return summarise();
  }

 private:
  void place(uint32_t j, uint32_t g) {
    if (o_.slots == 2 && gpus_[g].size() == 1) {
      // A pair forms: a co-location episode until the first of the two finishes.
      const uint32_t r = gpus_[g].front();
      st_[r].episode = st_[j].episode = static_cast<uint32_t>(episodes_.size());
      episodes_.push_back({r, j, now_, st_[r].remaining + st_[j].remaining});
    }
    gpus_[g].push_back(j);
    st_[j].gpu = g;
    res_.jobs[j].start = now_;
  }

  // The GPU kube-scheduler's GPU-sharing placement picks: the fullest one with a free slot
  // (bin-packing, lowest index first).
  std::optional<uint32_t> packing_gpu() const {
    std::optional<uint32_t> best;
    for (uint32_t g = 0; g < gpus_.size(); ++g) {
      if (gpus_[g].size() >= o_.slots) continue;
      if (!best || gpus_[g].size() > gpus_[*best].size()) best = g;
    }
    return best;
  }

  void schedule() {
    if (p_.kind != ColocScheduler::kRecommend) {
      while (!queue_.empty()) {
        const auto g = packing_gpu();
        if (!g) break;
        size_t qi = 0;
        if (p_.kind == ColocScheduler::kRandom) qi = uniform_below(rng_, queue_.size());
        const uint32_t j = queue_[qi];
        queue_.erase(queue_.begin() + static_cast<std::ptrdiff_t>(qi));
        place(j, *g);
      }
      return;
    }
    for (bool changed = true; changed && !queue_.empty();) {
      changed = false;
      // Fill GPUs that host jobs with the recommended competitors.
      for (uint32_t g = 0; g < gpus_.size() && !queue_.empty(); ++g) {
        if (gpus_[g].empty() || gpus_[g].size() >= o_.slots) continue;
        residents_.clear();
        for (uint32_t r : gpus_[g]) {
          Candidate c = w_.jobs[jobs_[r].catalog];
          c.estimate = jobs_[r].estimate;
          c.remaining = std::max(jobs_[r].estimate - st_[r].est_done,
                                 o_.min_remaining_share * jobs_[r].estimate);
          residents_.push_back(c);
        }
        cands_.clear();
        for (uint32_t q : queue_) {
          Candidate c = w_.jobs[jobs_[q].catalog];
          c.estimate = c.remaining = jobs_[q].estimate;
          cands_.push_back(c);
        }
        const auto rec = recommend(residents_, cands_, model_, p_.rec, rng_);
        if (!rec) continue;
        if (rec->explored) ++res_.explored;
        const uint32_t j = queue_[rec->index];
        queue_.erase(queue_.begin() + static_cast<std::ptrdiff_t>(rec->index));
        place(j, g);
        changed = true;
      }
      // An empty GPU takes the head of the queue, then a competitor on the next pass.
      for (uint32_t g = 0; g < gpus_.size() && !queue_.empty(); ++g) {
        if (!gpus_[g].empty()) continue;
        const uint32_t j = queue_.front();
        queue_.erase(queue_.begin());
        place(j, g);
        changed = true;
        break;
      }
    }
  }

  void update_speeds() {
    for (const auto& g : gpus_) {
      for (uint32_t j : g) {
        double s = 1, est = 1;
        const uint32_t cj = w_.jobs[jobs_[j].catalog].cluster;
        for (uint32_t p : g) {
          if (p == j) continue;
          const uint32_t cp = w_.jobs[jobs_[p].catalog].cluster;
          s *= w_.truth.speed(jobs_[j].catalog, jobs_[p].catalog, cj, cp, w_.seeded);
          est *= model_.pair_speed(cj, cp);
        }
        st_[j].speed = std::max(s, 1e-6);
        st_[j].est_speed = est;
      }
    }
  }

  void advance(double dt) {
    for (uint32_t g = 0; g < gpus_.size(); ++g) {
      if (gpus_[g].empty()) continue;
      busy_[g] += dt;
      if (gpus_[g].size() == 1) alone_time_ += dt;
      for (uint32_t j : gpus_[g]) {
        const double work = st_[j].speed * dt;
        st_[j].remaining -= work;
        st_[j].est_done += st_[j].est_speed * dt;
        for (uint32_t p : gpus_[g]) {
          if (p == j) continue;
          res_.jobs[j].colocated = true;
          coloc_time_ += dt;
          if (w_.truth.measured(jobs_[j].catalog, jobs_[p].catalog)) measured_time_ += dt;
          add_segment(j, p, dt, work);
        }
      }
    }
  }

  void add_segment(uint32_t j, uint32_t p, double dt, double work) {
    for (Segment& s : st_[j].segments) {
      if (s.partner == p) {
        s.time += dt;
        s.work += work;
        return;
      }
    }
    st_[j].segments.push_back({p, dt, work});
  }

  void finish(uint32_t j, double now) {
    st_[j].done = true;
    st_[j].remaining = 0;
    res_.jobs[j].finish = now;
    if (st_[j].episode != UINT32_MAX) {
      // The episode ends: the seed study's PacSav of the pair, the survivor's work left then
      // counted as run alone.
      Episode& e = episodes_[st_[j].episode];
      const uint32_t other = e.a == j ? e.b : e.a;
      const double left = st_[other].done ? 0.0 : std::max(st_[other].remaining, 0.0);
      if (e.work > 0) {
        pacsav_pairs_sum_ += (e.work - (now - e.start) - left) / e.work;
        ++res_.episodes;
      }
      st_[j].episode = st_[other].episode = UINT32_MAX;
    }
    if (!o_.learn) return;
    // The co-located run of j with each partner is over: what was seen updates the model (once
    // per pair, when the first of the two finishes).
    for (const Segment& s : st_[j].segments) {
      if (st_[s.partner].done || s.time <= 0) continue;
      for (const Segment& back : st_[s.partner].segments) {
        if (back.partner != j || back.time <= 0) continue;
        model_.observe_speeds(w_.jobs[jobs_[j].catalog].cluster,
                              w_.jobs[jobs_[s.partner].catalog].cluster, s.work / s.time,
                              back.work / back.time);
      }
    }
  }

  ColocRun summarise() {
    double sum_work = 0, sum_sd = 0, sum_sd_c = 0, sum_jct = 0, last = 0;
    for (size_t i = 0; i < jobs_.size(); ++i) {
      const ColocJobResult& r = res_.jobs[i];
      const double sd = (r.finish - r.start - jobs_[i].work) / jobs_[i].work;
      sum_sd += sd;
      if (r.colocated) {
        sum_sd_c += sd;
        ++res_.colocated_jobs;
      }
      sum_work += jobs_[i].work;
      sum_jct += r.finish - jobs_[i].submit;
      last = std::max(last, r.finish);
    }
    double sum_busy = 0;
    for (double b : busy_) sum_busy += b;
    const double n = static_cast<double>(std::max<size_t>(1, jobs_.size()));
    res_.indsd_mean = sum_sd / n;
    res_.indsd_colocated_mean =
        res_.colocated_jobs ? sum_sd_c / static_cast<double>(res_.colocated_jobs) : 0;
    res_.pacsav = sum_work > 0 ? (sum_work - sum_busy) / sum_work : 0;
    res_.pacsav_pairs =
        res_.episodes ? pacsav_pairs_sum_ / static_cast<double>(res_.episodes) : 0.0;
    res_.makespan = jobs_.empty() ? 0 : last - jobs_.front().submit;
    res_.mean_jct = sum_jct / n;
    res_.measured_share = coloc_time_ > 0 ? measured_time_ / coloc_time_ : 0;
    res_.alone_share = sum_busy > 0 ? alone_time_ / sum_busy : 0;
    return std::move(res_);
  }

  const ColocWorld& w_;
  std::span<const ColocJob> jobs_;
  const ColocPolicy& p_;
  const ColocOptions& o_;
  std::mt19937_64 rng_;
  InterferenceModel model_;  // what the recommender knows; learns as runs finish
  std::vector<JobState> st_;
  std::vector<std::vector<uint32_t>> gpus_;
  std::vector<double> busy_;
  std::vector<uint32_t> queue_;
  std::vector<Candidate> residents_, cands_;
  double now_ = 0;
  double coloc_time_ = 0, measured_time_ = 0, alone_time_ = 0;
  struct Episode {
    uint32_t a = 0, b = 0;
    double start = 0, work = 0;  // work: both jobs' time alone left when the pair formed
  };
  std::vector<Episode> episodes_;
  double pacsav_pairs_sum_ = 0;
  ColocRun res_;
};

}  // namespace

ColocRun run_colocation(const ColocWorld& world, std::span<const ColocJob> jobs,
                        const ColocPolicy& policy, const ColocOptions& opt, uint64_t seed) {
  return Run(world, jobs, policy, opt, seed).go();
}

namespace {
uint64_t name_hash(const std::string& name) {
  uint64_t h = 1469598103934665603ULL;  // FNV-1a
  for (unsigned char c : name) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  return h;
}
}  // namespace

std::vector<ColocSummary> run_colocation_experiment(const ColocWorld& world,
                                                    std::span<const ColocPolicy> policies,
                                                    const ColocOptions& opt, uint64_t seed,
                                                    size_t seeds) {
  std::vector<ColocSummary> out(policies.size());
  for (size_t p = 0; p < policies.size(); ++p) out[p].policy = policies[p].name;
  const double n = static_cast<double>(std::max<size_t>(1, seeds));
  for (size_t s = 0; s < seeds; ++s) {
    if (opt.progress) {
      opt.progress(Progress{static_cast<double>(s), static_cast<double>(seeds), "seeds"});
    }
    const auto jobs = make_colocation_workload(world, opt, seed + s);
    for (size_t p = 0; p < policies.size(); ++p) {
      // The policy's own random stream depends on its name, not on its place in the list, so a
      // policy gives the same numbers however it is run (--policy all or alone).
      const ColocRun r = run_colocation(world, jobs, policies[p], opt,
                                        (seed + s) * 7919 + name_hash(policies[p].name));
      ColocSummary& o = out[p];
      o.indsd += r.indsd_mean / n;
      o.indsd_colocated += r.indsd_colocated_mean / n;
      o.pacsav += r.pacsav / n;
      o.pacsav_pairs += r.pacsav_pairs / n;
      o.explored += static_cast<double>(r.explored) / n;
      o.makespan += r.makespan / n;
      o.mean_jct += r.mean_jct / n;
      o.measured_share += r.measured_share / n;
      o.alone_share += r.alone_share / n;
      o.indsd_per_seed.push_back(r.indsd_mean);
      o.pacsav_per_seed.push_back(r.pacsav);
      o.pacsav_pairs_per_seed.push_back(r.pacsav_pairs);
    }
  }
  return out;
}

}  // namespace tessera
