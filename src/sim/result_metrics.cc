#include "sim/result_metrics.h"

#include <fmt/format.h>

#include "model/accounting_json.h"

#include <algorithm>
#include <cmath>

namespace tessera {

Summary summarize(std::vector<double> v) {
  Summary s;
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  double sum = 0;
  for (double x : v) sum += x;
  s.mean = sum / static_cast<double>(v.size());
  auto pct = [&](double p) {
    const double pos = p / 100.0 * static_cast<double>(v.size() - 1);
    const auto lo = static_cast<size_t>(std::floor(pos));
    const size_t hi = std::min(lo + 1, v.size() - 1);
    return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
  };
  s.p50 = pct(50);
  s.p95 = pct(95);
  s.p99 = pct(99);
  return s;
}

namespace {

nlohmann::ordered_json to_json(const Summary& s) {
  nlohmann::ordered_json j;
  j["mean"] = s.mean;
  j["p50"] = s.p50;
  j["p95"] = s.p95;
  j["p99"] = s.p99;
  return j;
}

// The values at probabilities 0, 1/(n-1), ..., 1 (interpolated as summarize's percentiles),
// rounded to 0.1 s: a CDF of any number of jobs in a fixed, small size (tessera report plots
// it). Empty input gives an empty array.
nlohmann::ordered_json quantile_points(std::vector<double> v, size_t n) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  if (v.empty() || n < 2) return out;
  std::sort(v.begin(), v.end());
  for (size_t i = 0; i < n; ++i) {
    const double pos =
        static_cast<double>(i) / static_cast<double>(n - 1) * static_cast<double>(v.size() - 1);
    const auto lo = static_cast<size_t>(std::floor(pos));
    const size_t hi = std::min(lo + 1, v.size() - 1);
    const double x = v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
    out.push_back(std::round(x * 10) / 10);
  }
  return out;
}

// How many of `times` fall in each bucket of `interval` seconds from `start`, over `buckets`
// buckets (a time past the end counts in the last).
nlohmann::ordered_json bucket_counts(const std::vector<double>& times, double start,
                                     double interval, size_t buckets) {
  std::vector<uint64_t> counts(buckets, 0);
  for (double t : times) {
    const double k = std::floor((t - start) / interval);
    counts[static_cast<size_t>(std::clamp(k, 0.0, static_cast<double>(buckets - 1)))]++;
  }
  return counts;
}

constexpr size_t kCdfPoints = 201;  // every half percentile

}  // namespace

namespace {

// The energy section (docs/energy.md): the cluster's IT and facility energy, and per tenant its
// GPUs' own energy and its attributed share (its GPU energy plus the idle and node base energy
// in proportion to its GPU-hours, times PUE), so that the tenants' shares add up to the whole.
nlohmann::ordered_json energy_json(const Workload& w, const SimResult& r) {
  constexpr double kJPerKwh = 3.6e6;
  const EnergyStats& e = r.energy;
  const double overhead = std::max(0.0, e.it_j - e.gpu_busy_j);
  const double facility = e.it_j * e.pue;
  nlohmann::ordered_json j;
  j["it_kwh"] = e.it_j / kJPerKwh;
  j["facility_kwh"] = facility / kJPerKwh;
  j["gpu_busy_kwh"] = e.gpu_busy_j / kJPerKwh;
  j["idle_and_base_kwh"] = overhead / kJPerKwh;
  const double span = r.last_finish - r.first_submit;
  j["mean_it_kw"] = span > 0 ? e.it_j / span / 1000 : 0.0;
  j["peak_it_kw"] = e.peak_w / 1000;
  j["idle_kw"] = e.idle_w / 1000;
  j["power_cap_kw"] =
      e.cap_w < kNoPowerCap ? nlohmann::ordered_json(e.cap_w / 1000) : nlohmann::ordered_json();
  j["pue"] = e.pue;
  j["cost"] = facility / kJPerKwh * e.price_per_kwh;
  const double overhead_g = std::max(0.0, e.it_carbon_g - e.busy_carbon_g);
  j["carbon_kg"] =
      e.carbon ? nlohmann::ordered_json(e.it_carbon_g * e.pue / 1000) : nlohmann::ordered_json();
  j["power_limit_changes"] = e.limit_changes;
  j["throttled_gpu_hours"] = e.throttled_gpu_seconds / 3600;
  j["slept_kwh"] = e.slept_j / kJPerKwh;
  j["asleep_node_hours"] = e.asleep_node_seconds / 3600;
  j["node_wakes"] = e.wakes;
  j["wake_wait_hours"] = e.wake_wait_seconds / 3600;
  auto to_kwh = [&](const std::vector<double>& v) {
    nlohmann::ordered_json a = nlohmann::ordered_json::array();
    for (double x : v) a.push_back(x / kJPerKwh);
    return a;
  };
  j["series"] = {{"start", r.first_submit},
                 {"interval_s", e.series_interval},
                 {"it_kwh", to_kwh(e.it_series_j)},
                 {"gpu_busy_kwh", to_kwh(e.busy_series_j)},
                 {"slept_kwh", to_kwh(e.slept_series_j)}};
  nlohmann::ordered_json by = nlohmann::ordered_json::array();
  for (TenantId t = 0; t < w.tenants.size() && t < r.tenants.size(); ++t) {
    const TenantSeries& ts = r.tenants[t];
    const double share =
        r.allocated_gpu_seconds > 0 ? ts.gpu_seconds / r.allocated_gpu_seconds : 0.0;
    const double kwh = (ts.gpu_energy_j + overhead * share) * e.pue / kJPerKwh;
    nlohmann::ordered_json row = {{"tenant", w.tenants.name(t)},
                                  {"gpu_kwh", ts.gpu_energy_j / kJPerKwh},
                                  {"kwh", kwh},
                                  {"cost", kwh * e.price_per_kwh}};
    if (e.carbon) row["carbon_kg"] = (ts.gpu_carbon_g + overhead_g * share) * e.pue / 1000;
    by.push_back(row);
  }
  j["by_tenant"] = by;
  return j;
}

}  // namespace

nlohmann::ordered_json make_report(const Workload& w, const Cluster& c, const SimResult& r,
                                   const ReportContext& ctx) {
  std::vector<double> jct, wait;
  const size_t nt = std::max<size_t>(w.tenants.size(), 1);
  std::vector<std::vector<double>> t_jct(nt), t_wait(nt);
  std::vector<int64_t> reasons(kNumPendingCodes, 0);
  size_t finished = 0;
  // SLA: jobs with a maximum queueing delay, and how many started within it.
  size_t sla_jobs = 0, sla_met = 0;
  std::vector<size_t> t_sla_jobs(nt, 0), t_sla_met(nt, 0), t_preempt(nt, 0);
  std::vector<double> t_lost_gpu(nt, 0.0);
  // Finish-time fairness (Themis): JCT shared / JCT isolated, where isolated is the job's
  // reference duration on its own 1/N of the cluster (N tenants): a gang bigger than that
  // share would run proportionally longer there.
  std::vector<double> ftf;
  const double slice = static_cast<double>(c.num_gpus()) / static_cast<double>(nt);
  for (JobId j = 0; j < w.jobs.size(); ++j) {
    const JobOutcome& o = r.jobs[j];
    if (o.finish < 0) continue;
    ++finished;
    const TenantId t = w.jobs[j].tenant;
    jct.push_back(o.finish - o.submit);
    wait.push_back(o.first_start - o.submit);
    t_jct[t].push_back(o.finish - o.submit);
    t_wait[t].push_back(o.first_start - o.submit);
    if (o.has_first_reason) reasons[static_cast<size_t>(o.first_reason)]++;
    const JobSpec& spec = w.jobs[j];
    if (spec.sla_max_queueing >= 0) {
      const bool met = o.first_start - o.submit <= spec.sla_max_queueing;
      ++sla_jobs;
      ++t_sla_jobs[t];
      sla_met += met;
      t_sla_met[t] += met;
    }
    const double gpus = static_cast<double>(spec.gpu_milli_per_gang(spec.min_members)) / 1000.0;
    const double isolated = spec.work_seconds * std::max(1.0, slice > 0 ? gpus / slice : 1.0);
    if (isolated > 0) ftf.push_back((o.finish - o.submit) / isolated);
  }
  // Per tenant over every job, finished or not: preemptions, lost work, and (accounting) the
  // jobs that started and their waits.
  std::vector<int64_t> t_started(nt, 0);
  std::vector<double> t_wait_hours(nt, 0.0);
  // Preemption's price per tenant (the victims'): the grace, the lost work and the restarts.
  std::vector<double> t_restart_gpu(nt, 0.0), t_cost_gpu(nt, 0.0);
  for (JobId j = 0; j < w.jobs.size(); ++j) {
    const JobOutcome& o = r.jobs[j];
    const TenantId t = w.jobs[j].tenant;
    t_preempt[t] += static_cast<size_t>(o.preemptions);
    t_lost_gpu[t] += o.lost_gpu_seconds;
    t_restart_gpu[t] += o.restart_gpu_seconds;
    t_cost_gpu[t] += o.grace_gpu_seconds + o.lost_gpu_seconds + o.restart_gpu_seconds;
    if (o.first_start >= 0) {
      ++t_started[t];
      t_wait_hours[t] += (o.first_start - o.submit) / 3600.0;
    }
  }
  const double makespan = r.last_finish - r.first_submit;
  const double capacity = static_cast<double>(c.num_gpus()) * makespan;
  nlohmann::ordered_json j;
  j["policy"] = ctx.policy;
  j["seed"] = ctx.seed;
  j["workload"] = ctx.workload;
  if (!ctx.run.is_null()) j["run"] = ctx.run;
  j["cluster"] = {{"nodes", c.nodes().size()}, {"gpus", c.num_gpus()}};
  j["jobs"] = w.jobs.size();
  j["finished"] = finished;
  j["jct"] = to_json(summarize(jct));
  j["jct"]["cdf"] = quantile_points(jct, kCdfPoints);
  j["queueing_delay"] = to_json(summarize(wait));
  j["queueing_delay"]["cdf"] = quantile_points(wait, kCdfPoints);
  j["makespan"] = makespan;
  j["gpu_allocation"] = capacity > 0 ? r.allocated_gpu_seconds / capacity : 0.0;
  j["effective_utilisation"] = capacity > 0 ? r.effective_gpu_seconds / capacity : 0.0;
  nlohmann::ordered_json fairness;
  if (r.jain_time > 0) {
    fairness["jain"] = r.jain_integral / r.jain_time;
  } else {
    // One tenant is trivially fair; with several, "every tenant had demand" never held.
    fairness["jain"] =
        w.tenants.size() <= 1 ? nlohmann::ordered_json(1.0) : nlohmann::ordered_json();
  }
  fairness["jain_seconds"] = r.jain_time;
  const Summary f = summarize(ftf);
  fairness["finish_time_fairness"] = {
      {"mean", f.mean}, {"max", ftf.empty() ? 0.0 : *std::max_element(ftf.begin(), ftf.end())}};
  j["fairness"] = fairness;
  j["sla"] = {{"jobs", sla_jobs},
              {"met", sla_met},
              {"satisfaction", sla_jobs > 0
                                   ? nlohmann::ordered_json(static_cast<double>(sla_met) / sla_jobs)
                                   : nlohmann::ordered_json()}};
  j["preemptions"] = r.preemptions;
  nlohmann::ordered_json causes;
  for (int k = 0; k < kPreemptionCauses; ++k) {
    causes[to_string(static_cast<PreemptionCause>(k))] = r.preemptions_by_cause[k];
  }
  j["preemptions_by_cause"] = causes;
  j["preemption_grace_gpu_hours"] = r.preemption_grace_gpu_seconds / 3600.0;
  if (r.rounds > 0) {
    j["rounds"] = r.rounds;
    j["round_lp_solves"] = r.round_lp_solves;
  }
  j["resizes"] = r.resizes;
  if (r.failure.failures > 0) {
    const FailureStats& fs = r.failure;
    nlohmann::ordered_json frt = to_json(summarize(fs.frt));
    frt["max"] = fs.frt.empty() ? 0.0 : *std::max_element(fs.frt.begin(), fs.frt.end());
    j["failures"] = {{"node_failures", fs.failures},
                     {"jobs_hit", fs.jobs_hit},
                     {"frt_seconds", frt},
                     {"unrecovered", fs.unrecovered},
                     {"restarted_in_place", fs.restarted_in_place},
                     {"lost_gpu_hours", fs.lost_gpu_seconds / 3600.0}};
  }
  double lost = 0, lost_gpu = 0;
  for (const JobOutcome& o : r.jobs) {
    lost += o.lost_work_seconds;
    lost_gpu += o.lost_gpu_seconds;
  }
  j["lost_work_seconds"] = lost;
  j["lost_gpu_hours"] = lost_gpu / 3600.0;
  double restart_gpu = 0;
  for (const JobOutcome& o : r.jobs) restart_gpu += o.restart_gpu_seconds;
  j["restart_overhead_gpu_hours"] = restart_gpu / 3600.0;
  j["preemption_cost_gpu_hours"] =
      (r.preemption_grace_gpu_seconds + lost_gpu + restart_gpu) / 3600.0;
  nlohmann::ordered_json why;
  for (size_t k = 0; k < reasons.size(); ++k) {
    // The simulator reserves no GPUs: a code it cannot give is left out.
    if (static_cast<PendingCode>(k) == PendingCode::kReservedGpus && reasons[k] == 0) continue;
    why[to_string(static_cast<PendingCode>(k))] = reasons[k];
  }
  j["first_pending_reason"] = why;
  nlohmann::ordered_json per;
  for (TenantId t = 0; t < w.tenants.size(); ++t) {
    nlohmann::ordered_json pt;
    pt["jobs"] = t_jct[t].size();
    pt["jct"] = to_json(summarize(t_jct[t]));
    pt["queueing_delay"] = to_json(summarize(t_wait[t]));
    pt["gpu_hours"] = r.tenants[t].gpu_seconds / 3600.0;
    pt["preemptions"] = t_preempt[t];
    pt["lost_gpu_hours"] = t_lost_gpu[t] / 3600.0;
    pt["restart_overhead_gpu_hours"] = t_restart_gpu[t] / 3600.0;
    pt["preemption_cost_gpu_hours"] = t_cost_gpu[t] / 3600.0;
    if (t_sla_jobs[t] > 0) {
      pt["sla"] = {{"jobs", t_sla_jobs[t]},
                   {"met", t_sla_met[t]},
                   {"satisfaction", static_cast<double>(t_sla_met[t]) / t_sla_jobs[t]}};
    }
    per[w.tenants.name(t)] = pt;
  }
  j["per_tenant"] = per;
  // Accounting over the whole run (tessera usage --result), in GET /v1/usage's schema: every
  // job of a simulation ends by finishing (succeeded); GPU-hours by type include a victim's
  // checkpoint grace, as the service's runs do.
  nlohmann::ordered_json usage = nlohmann::ordered_json::array();
  for (TenantId t = 0; t < w.tenants.size() && t < r.tenants.size(); ++t) {
    const TenantSeries& ts = r.tenants[t];
    UsageRow row;
    row.tenant = w.tenants.name(t);
    row.queue = ts.queue;
    for (GpuTypeId g = 0; g < ts.gpu_seconds_by_type.size(); ++g) {
      if (ts.gpu_seconds_by_type[g] > 0) {
        row.gpu_hours[c.gpu_types().at(g).name] = ts.gpu_seconds_by_type[g] / 3600.0;
      }
    }
    row.cpu_hours = ts.cpu_seconds / 3600.0;
    if (!t_jct[t].empty()) row.jobs["succeeded"] = static_cast<int64_t>(t_jct[t].size());
    row.started = t_started[t];
    row.wait_hours_sum = t_wait_hours[t];
    row.preempted = static_cast<int64_t>(t_preempt[t]);
    row.preemptor = static_cast<int64_t>(ts.preemptor);
    usage.push_back(usage_row_json<nlohmann::ordered_json>(row));
  }
  j["usage"] = usage;
  if (r.energy.modelled) j["energy"] = energy_json(w, r);
  if (r.data_modelled) {
    const DataStats& d = r.data;
    const auto share = [&](int64_t n) {
      return d.node_reads > 0 ? nlohmann::ordered_json(static_cast<double>(n) / d.node_reads)
                              : nlohmann::ordered_json();
    };
    j["data"] = {{"runs", d.starts},
                 {"staging_hours", d.staging_seconds / 3600},
                 {"staging_gpu_hours", d.staging_gpu_seconds / 3600},
                 {"unqueued_staging_gpu_hours", d.unqueued_staging_gpu_seconds / 3600},
                 {"cold_staging_gpu_hours", d.cold_staging_gpu_seconds / 3600},
                 {"node_reads", d.node_reads},
                 {"nvme_hit_rate", share(d.nvme_hits)},
                 {"cache_hit_rate", share(d.cache_hits)},
                 {"object_read_rate", share(d.object_reads)},
                 {"streamed", d.streamed},
                 {"object_gb", d.object_gb},
                 {"cache_gb", d.cache_gb},
                 {"prestaged_gb", d.prestaged_gb}};
  }
  if (!r.series.queues.empty()) {
    // Mean GPUs held and entitled per leaf queue, per bucket of `interval_s`.
    nlohmann::ordered_json series;
    series["start"] = r.series.start;
    series["interval_s"] = r.series.interval;
    nlohmann::ordered_json queues;
    for (size_t i = 0; i < r.series.queues.size(); ++i) {
      queues[r.series.queues[i]] = {{"gpus", r.series.gpus[i]}, {"entitled", r.series.entitled[i]}};
    }
    series["queues"] = queues;
    j["share_series"] = series;
  }
  {
    // Preemptions and node failures per bucket of the share series' interval (an hour without
    // one), from the first submit to the last finish: the report's timeline.
    const double interval = r.series.interval > 0 ? r.series.interval : 3600.0;
    const auto buckets = static_cast<size_t>(std::max(1.0, std::ceil(makespan / interval)));
    j["timeline"] = {
        {"start", r.first_submit},
        {"interval_s", interval},
        {"preemptions", bucket_counts(r.preemption_times, r.first_submit, interval, buckets)},
        {"node_failures", bucket_counts(r.failure.times, r.first_submit, interval, buckets)}};
  }
  if (!r.histories.empty()) {
    // Times are seconds since the first submit, as in the share series.
    nlohmann::ordered_json hist;
    for (const JobHistory& h : r.histories) {
      nlohmann::ordered_json entries = nlohmann::ordered_json::array();
      for (const HistoryEntry& e : h.entries) {
        entries.push_back({{"t", e.t - r.first_submit}, {"what", e.what}});
      }
      hist[w.jobs[h.job].name] = entries;
    }
    j["why"] = hist;
  }
  j["sim"] = {{"cycles", r.cycles}, {"events", r.events}};
  return j;
}

std::string format_histories(const nlohmann::ordered_json& j) {
  std::string out;
  if (!j.contains("why")) return out;
  for (const auto& [name, entries] : j["why"].items()) {
    out += fmt::format("\nwhy {} (hours since the first submit):\n", name);
    for (const auto& e : entries) {
      out += fmt::format("{:>10.3f}  {}\n", e["t"].get<double>() / 3600.0,
                         e["what"].get<std::string>());
    }
  }
  return out;
}

std::string format_summary(const nlohmann::ordered_json& j) {
  auto h = [](double s) { return s / 3600.0; };
  std::string out;
  const std::string backfill =
      j.contains("run") ? "  backfill " + j["run"]["policy"]["backfill"].get<std::string>() : "";
  out += fmt::format("policy {}{}  seed {}  workload {}\n", j["policy"].get<std::string>(),
                     backfill, j["seed"].get<uint64_t>(), j["workload"].get<std::string>());
  out += fmt::format("cluster {} nodes, {} GPUs; jobs {}, finished {}\n",
                     j["cluster"]["nodes"].get<size_t>(), j["cluster"]["gpus"].get<uint32_t>(),
                     j["jobs"].get<size_t>(), j["finished"].get<size_t>());
  out += fmt::format("{:<16}{:>10}{:>10}{:>10}{:>10}\n", "hours", "mean", "p50", "p95", "p99");
  for (const char* k : {"jct", "queueing_delay"}) {
    const auto& s = j[k];
    out += fmt::format("{:<16}{:>10.3f}{:>10.3f}{:>10.3f}{:>10.3f}\n", k,
                       h(s["mean"].get<double>()), h(s["p50"].get<double>()),
                       h(s["p95"].get<double>()), h(s["p99"].get<double>()));
  }
  out += fmt::format("makespan {:.3f} h   GPU allocation {:.1f} %   effective {:.1f} %\n",
                     h(j["makespan"].get<double>()), 100 * j["gpu_allocation"].get<double>(),
                     100 * j["effective_utilisation"].get<double>());
  const auto& jain = j["fairness"]["jain"];
  const auto& sla = j["sla"]["satisfaction"];
  out += fmt::format(
      "fairness (Jain) {}   SLA met {}   preemptions {}   lost {:.1f} GPU-h   preemption cost "
      "{:.1f} GPU-h\n",
      jain.is_null() ? std::string("n/a") : fmt::format("{:.3f}", jain.get<double>()),
      sla.is_null() ? std::string("n/a") : fmt::format("{:.1f} %", 100 * sla.get<double>()),
      j["preemptions"].get<uint64_t>(), j["lost_gpu_hours"].get<double>(),
      j["preemption_cost_gpu_hours"].get<double>());
  if (j.contains("energy")) {
    const auto& e = j["energy"];
    out += fmt::format(
        "energy {:.1f} kWh IT ({:.1f} kWh GPUs busy)   mean {:.1f} kW   peak {:.1f} kW{}\n",
        e["it_kwh"].get<double>(), e["gpu_busy_kwh"].get<double>(), e["mean_it_kw"].get<double>(),
        e["peak_it_kw"].get<double>(),
        e["power_cap_kw"].is_null()
            ? std::string()
            : fmt::format("   cap {:.1f} kW", e["power_cap_kw"].get<double>()));
    if (!e["carbon_kg"].is_null()) {
      out += fmt::format("carbon {:.1f} kg CO2\n", e["carbon_kg"].get<double>());
    }
  }
  if (j.contains("failures")) {  // (only --json had them once)
    const auto& f = j["failures"];
    out += fmt::format(
        "node failures {}   jobs hit {}   recovery mean {:.1f} min (max {:.1f})   unrecovered "
        "{}   restarted in place {}   lost {:.1f} GPU-h\n",
        f["node_failures"].get<uint64_t>(), f["jobs_hit"].get<uint64_t>(),
        f["frt_seconds"]["mean"].get<double>() / 60, f["frt_seconds"]["max"].get<double>() / 60,
        f["unrecovered"].get<uint64_t>(), f["restarted_in_place"].get<uint64_t>(),
        f["lost_gpu_hours"].get<double>());
  }
  if (j["per_tenant"].size() > 1) {
    out += fmt::format("{:<20}{:>8}{:>14}{:>16}\n", "tenant", "jobs", "mean JCT h", "mean wait h");
    for (const auto& [name, t] : j["per_tenant"].items()) {
      out += fmt::format("{:<20}{:>8}{:>14.3f}{:>16.3f}\n", name, t["jobs"].get<size_t>(),
                         h(t["jct"]["mean"].get<double>()),
                         h(t["queueing_delay"]["mean"].get<double>()));
    }
  }
  return out;
}

}  // namespace tessera
