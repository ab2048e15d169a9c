// Power caps, the energy knob and energy accounting (docs/energy.md), through the
// simulator and the engine: what a user would notice is that the estimated draw never passes
// the cap, that shifting power limits costs less time than holding jobs, that the energy knob
// trades time for energy, and that the energy figures add up.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "engine/cycle.h"
#include "engine/power_budget.h"
#include "insight/power_model.h"
#include "insight/zeus_curves.h"
#include "model/carbon_intensity.h"
#include "model/cluster_spec.h"
#include "model/input_error.h"
#include "model/queue_tree.h"
#include "sim/generator.h"
#include "sim/result_metrics.h"
#include "sim/simulator.h"
#include "sim_test_util.h"

namespace tessera {
namespace {

using testing::UnitSpeed;

// A model with measured-like curves for every type: one synthetic curve (no data needed), on
// V100 (250 W TDP, 34.75 W idle): at 100 W a job runs at 60 % speed drawing 95 W.
PowerModel synthetic_model() {
  PowerModel::TypeCurves v100;
  v100[""] = PowerCurve({{100, 0.6, 95}, {150, 0.85, 130}, {200, 0.97, 165}, {250, 1.0, 200}});
  return PowerModel({{"V100", v100}});
}

double mean_jct(const SimResult& r) {
  double sum = 0;
  for (const JobOutcome& o : r.jobs) sum += o.finish - o.submit;
  return sum / static_cast<double>(r.jobs.size());
}

struct CapRun {
  SimResult result;
  double cap_w = kNoPowerCap;
};

CapRun run_sim(const Workload& w, const Cluster& c, const PowerModel& m, double cap_fraction,
               bool shifting, double eta = 0) {
  Policy p = make_policy("fifo", 1);
  p.power_shifting = shifting;
  const UnitSpeed model;
  SimOptions opt;
  opt.power = &m;
  opt.energy.node_base_w = 200;
  double peak = 0;
  for (const Node& n : c.nodes()) peak += 200 + n.num_gpus * 250.0;
  if (cap_fraction > 0) opt.energy.cap_w = peak * cap_fraction;
  opt.energy.energy_weight = eta;
  return CapRun{simulate(w, c, p, model, opt), opt.energy.cap_w};
}

// One engine cycle on an empty cluster with every job of `w` pending, under `power`.
Decisions cycle_with_power(const Cluster& c, const Workload& w, const PowerView& power,
                           const Policy& p) {
  ClusterState state(c);
  std::vector<PendingJob> pending;
  for (JobId j = 0; j < w.jobs.size(); ++j) {
    pending.push_back(PendingJob{j, &w.jobs[j], 0, 0, true});
  }
  Snapshot snap;
  snap.state = &state;
  snap.pending = pending;
  snap.power = &power;
  return schedule_cycle(snap, p);
}

Workload busy_workload() {
  GeneratorOptions g;
  g.jobs = 120;
  g.mean_interarrival_s = 120;  // load about 2 on 64 GPUs: power binds
  return generate_workload(g);
}

TEST(PowerCap, EstimatedDrawNeverPassesTheCapHoldingOrShifting) {
  const Cluster c = make_uniform_cluster(1, 2, 8, 4);  // 64 V100
  const PowerModel m = synthetic_model();
  const Workload w = busy_workload();
  const CapRun uncapped = run_sim(w, c, m, 0, false);
  EXPECT_GT(uncapped.result.energy.peak_w, 0.7 * (16 * 200 + 64 * 250.0) * 0.9);
  for (const bool shifting : {false, true}) {
    const CapRun capped = run_sim(w, c, m, 0.6, shifting);
    EXPECT_LE(capped.result.energy.peak_w, capped.cap_w + 1e-6) << shifting;
    for (const JobOutcome& o : capped.result.jobs) EXPECT_GE(o.finish, 0);  // all finished
    EXPECT_GT(mean_jct(capped.result), mean_jct(uncapped.result)) << shifting;
    if (shifting) {
      EXPECT_GT(capped.result.energy.limit_changes, 0u);
      EXPECT_GT(capped.result.energy.throttled_gpu_seconds, 0);
    } else {
      EXPECT_EQ(capped.result.energy.limit_changes, 0u);
      EXPECT_EQ(capped.result.energy.throttled_gpu_seconds, 0);
    }
  }
  // Lowering limits loses less time than holding whole jobs (the curves give 85 % of the speed
  // for 130 of 200 W).
  const double hold = mean_jct(run_sim(w, c, m, 0.6, false).result);
  const double shift = mean_jct(run_sim(w, c, m, 0.6, true).result);
  EXPECT_LT(shift - mean_jct(uncapped.result), 0.5 * (hold - mean_jct(uncapped.result)));
}

TEST(PowerCap, AHeldJobSaysItWaitsForPower) {
  // One node of 4 GPUs, idle 200 + 4 x 34.75 = 339 W; a cap of 600 W leaves 261 W above idle:
  // one job at full power (165.25 W above idle) fits, a second does not.
  const Cluster c = make_uniform_cluster(1, 1, 1, 4);
  const PowerModel m = synthetic_model();
  const GpuTypeTable& types = c.gpu_types();
  const BoundPowerModel bound(m, types, {});
  PowerView v;
  v.model = &bound;
  v.idle_w = 339;
  v.cap_w = 600;
  Workload w;
  w.tenants.intern("t");
  for (int i = 0; i < 2; ++i) {
    JobSpec j;
    j.name = "j" + std::to_string(i);
    j.work_seconds = 100;
    j.source = "test";
    w.jobs.push_back(j);
  }
  Policy p = make_policy("fifo", 1);
  Decisions d = cycle_with_power(c, w, v, p);
  ASSERT_EQ(d.starts.size(), 1u);
  EXPECT_EQ(d.starts[0].power_limit_w, 250);
  ASSERT_EQ(d.pending.size(), 1u);
  EXPECT_EQ(d.pending[0].code, PendingCode::kPowerCapped);
  EXPECT_NE(describe(d.pending[0]).find("power cap"), std::string::npos);
  EXPECT_STREQ(reason_code(d.pending[0].code), "PowerCap");
  // Shifting: both start, at limits whose draw fits: 2 x (inc) <= 261 W.
  p.power_shifting = true;
  d = cycle_with_power(c, w, v, p);
  ASSERT_EQ(d.starts.size(), 2u);
  double inc = 0;
  for (const Start& s : d.starts) {
    EXPECT_LT(s.power_limit_w, 250);
    inc += power_increment(v, c, w.jobs[s.job], s.alloc, s.power_limit_w);
  }
  EXPECT_LE(v.idle_w + inc, v.cap_w + 1e-9);
}

TEST(PowerCap, PowerFreedRaisesLoweredLimitsAgain) {
  const Cluster c = make_uniform_cluster(1, 1, 1, 4);
  const PowerModel m = synthetic_model();
  Workload w;
  w.tenants.intern("t");
  for (int i = 0; i < 2; ++i) {
    JobSpec j;
    j.name = "j" + std::to_string(i);
    j.work_seconds = i == 0 ? 100 : 10000;
    j.source = "test";
    w.jobs.push_back(j);
  }
  Policy p = make_policy("fifo", 1);
  p.power_shifting = true;
  const UnitSpeed model;
  SimOptions opt;
  opt.power = &m;
  opt.energy.node_base_w = 200;
  opt.energy.cap_w = 600;
  const SimResult r = simulate(w, c, p, model, opt);
  // Both start throttled; when j0 ends, j1 goes back to full power (a second limit change).
  EXPECT_GE(r.energy.limit_changes, 1u);
  EXPECT_LE(r.energy.peak_w, 600 + 1e-6);
  // j1 ran part of its work at full speed: it finished before it would have fully throttled.
  const double throttled_speed = m.curve("V100", "").speed(150);
  EXPECT_LT(r.jobs[1].finish, 10000 / throttled_speed);
}

TEST(EnergyAccounting, FiguresAddUp) {
  const Cluster c = make_uniform_cluster(1, 2, 8, 4);
  const PowerModel m = synthetic_model();
  const Workload w = busy_workload();
  const SimResult r = run_sim(w, c, m, 0, false).result;
  ASSERT_TRUE(r.energy.modelled);
  double jobs = 0, tenants = 0;
  for (const JobOutcome& o : r.jobs) jobs += o.gpu_energy_j;
  for (const TenantSeries& t : r.tenants) tenants += t.gpu_energy_j;
  EXPECT_NEAR(jobs, r.energy.gpu_busy_j, 1e-6 * jobs);
  EXPECT_NEAR(tenants, r.energy.gpu_busy_j, 1e-6 * jobs);
  // Unit speed at full power: every job drew 200 W per GPU for its GPU time.
  EXPECT_NEAR(r.energy.gpu_busy_j, 200 * r.allocated_gpu_seconds, 1e-6 * r.energy.gpu_busy_j);
  // IT energy = idle draw over the run + each busy GPU's draw above idle.
  const double span = r.last_finish - r.first_submit;
  const double idle = 16 * 200 + 64 * 34.75;
  EXPECT_NEAR(r.energy.idle_w, idle, 1e-9);
  EXPECT_NEAR(r.energy.it_j, idle * span + (200 - 34.75) * r.allocated_gpu_seconds,
              1e-6 * r.energy.it_j);
  // The report's tenants' attributed energy adds up to the facility's.
  const auto j = make_report(w, c, r, ReportContext{"fifo", 1, "test", {}});
  double kwh = 0;
  for (const auto& t : j["energy"]["by_tenant"]) kwh += t["kwh"].get<double>();
  EXPECT_NEAR(kwh, j["energy"]["facility_kwh"].get<double>(), 1e-6 * kwh);
  // Without a power model, no energy section.
  Policy p = make_policy("fifo", 1);
  const UnitSpeed model;
  const SimResult none = simulate(w, c, p, model, SimOptions{});
  EXPECT_FALSE(none.energy.modelled);
  EXPECT_FALSE(make_report(w, c, none, ReportContext{"fifo", 1, "test", {}}).contains("energy"));
}

TEST(EnergyKnob, EtaOneSpendsLessEnergyAndMoreTime) {
  const Cluster c = make_uniform_cluster(1, 2, 8, 4);
  const PowerModel m = synthetic_model();
  GeneratorOptions g;
  g.jobs = 60;
  g.mean_interarrival_s = 600;  // light load: the knob, not queueing, sets the difference
  const Workload w = generate_workload(g);
  const SimResult fast = run_sim(w, c, m, 0, false, 0.0).result;
  const SimResult frugal = run_sim(w, c, m, 0, false, 1.0).result;
  EXPECT_LT(frugal.energy.gpu_busy_j, 0.9 * fast.energy.gpu_busy_j);
  EXPECT_GT(mean_jct(frugal), mean_jct(fast));
  // A queue's own energy_weight wins over the default.
  const QueueTree tree =
      parse_queue_tree_yaml("queues:\n  - name: t\n    energy_weight: 1\n", "q.yaml");
  EXPECT_EQ(tree.queue(tree.size() - 1).energy_weight, 1);
  EXPECT_THROW(parse_queue_tree_yaml("queues:\n  - name: t\n    energy_weight: 2\n", "q.yaml"),
               InputError);
}

}  // namespace
}  // namespace tessera

namespace tessera {
namespace {

TEST(NodeSleep, EmptyNodesSleepAndAJobOnOneWaitsForItToWake) {
  // Two nodes of 4 GPUs. a (4 GPUs, t=0..1000) fills node-0; node-1 is empty from the start and
  // sleeps at t=100. b (8 GPUs, t=500) needs both nodes: it waits for a, then starts on both
  // at 1000, and node-1 must wake first (60 s).
  const Cluster c = make_uniform_cluster(1, 1, 2, 4);
  const PowerModel m = synthetic_model();
  Workload w;
  w.tenants.intern("t");
  JobSpec a;
  a.name = "a";
  a.min_members = a.max_members = 4;
  a.work_seconds = 1000;
  a.source = "test";
  JobSpec b = a;
  b.name = "b";
  b.min_members = b.max_members = 8;
  b.submit_time = 500;
  b.work_seconds = 100;
  w.jobs = {a, b};
  const Policy p = make_policy("fifo", 1);
  const UnitSpeed model;
  SimOptions opt;
  opt.power = &m;
  opt.energy.node_base_w = 200;
  opt.energy.sleep_after_s = 100;
  opt.energy.wake_s = 60;
  const SimResult r = simulate(w, c, p, model, opt);
  EXPECT_DOUBLE_EQ(r.jobs[1].first_start, 1060);
  EXPECT_DOUBLE_EQ(r.jobs[1].finish, 1160);
  EXPECT_EQ(r.energy.wakes, 1u);
  EXPECT_DOUBLE_EQ(r.energy.wake_wait_seconds, 60);
  // node-1 slept from 100 to 1000 (woken when b was placed); node-0 never slept (it ran a, then
  // b right away).
  const double node_idle = 200 + 4 * 34.75;
  EXPECT_NEAR(r.energy.asleep_node_seconds, 900, 1e-6);
  EXPECT_NEAR(r.energy.slept_j, 900 * node_idle, 1e-6);
  // The series adds up to the totals.
  double it = 0, slept = 0;
  for (double x : r.energy.it_series_j) it += x;
  for (double x : r.energy.slept_series_j) slept += x;
  EXPECT_NEAR(it, r.energy.it_j, 1e-6 * it);
  EXPECT_NEAR(slept, r.energy.slept_j, 1e-6);
  // Without sleep the run draws node-1's idle power for those 900 s more, but ends 60 s
  // sooner (both nodes idle while node-1 booted).
  opt.energy.sleep_after_s = -1;
  const SimResult awake = simulate(w, c, p, model, opt);
  EXPECT_DOUBLE_EQ(awake.jobs[1].finish, 1100);
  EXPECT_NEAR(awake.energy.it_j - r.energy.it_j, 900 * node_idle - 60 * 2 * node_idle, 1e-6);
}

}  // namespace
}  // namespace tessera

namespace tessera {
namespace {

SimResult run_carbon(const std::string& series, const std::string& queues, PriorityClass cls,
                     double duration_estimate = -1) {
  const Cluster c = make_uniform_cluster(1, 1, 1, 4);
  const PowerModel m = synthetic_model();
  const CarbonIntensity ci =
      CarbonIntensity::parse(series, "carbon.csv", CarbonIntensity::TimeBase::kRelative);
  Workload w;
  w.tenants.intern("t");
  JobSpec j;
  j.name = "be";
  j.work_seconds = 1800;
  j.priority = cls;
  j.priority_given = true;
  j.duration_estimate = duration_estimate;
  j.source = "test";
  w.jobs = {j};
  QueueTree tree = parse_queue_tree_yaml(queues, "q.yaml");
  tree.bind(w.tenants, "test");
  const Policy p = make_policy("fifo", 1);
  const UnitSpeed model;
  SimOptions opt;
  opt.power = &m;
  opt.carbon = &ci;
  opt.queues = &tree;
  return simulate(w, c, p, model, opt);
}

TEST(CarbonDeferral, ABestEffortJobWaitsForTheCleanerHourWithinItsQueuesBound) {
  // Dirty for two hours, then clean.
  const std::string series = "time,g_per_kwh\n0,500\n3600,500\n7200,100\n10800,100\n";
  const std::string defer = "queues:\n  - name: t\n    carbon_defer: 6h\n";
  EXPECT_DOUBLE_EQ(run_carbon(series, defer, PriorityClass::kBestEffort).jobs[0].first_start, 7200);
  // Other classes never wait for carbon; nor do jobs of queues without carbon_defer.
  EXPECT_DOUBLE_EQ(run_carbon(series, defer, PriorityClass::kResearch).jobs[0].first_start, 0);
  EXPECT_DOUBLE_EQ(
      run_carbon(series, "queues:\n  - name: t\n", PriorityClass::kBestEffort).jobs[0].first_start,
      0);
  // The bound holds: with only one hour allowed, the clean hour is out of reach.
  EXPECT_DOUBLE_EQ(
      run_carbon(series, "queues:\n  - name: t\n    carbon_defer: 1h\n", PriorityClass::kBestEffort)
          .jobs[0]
          .first_start,
      0);
  // A cleaner hour that comes later than the bound still releases the job at the bound: here
  // the intensity falls step by step and the job starts when its 90 minutes are up.
  const std::string falling = "time,g_per_kwh\n0,500\n1800,440\n3600,380\n5400,320\n7200,260\n";
  EXPECT_DOUBLE_EQ(run_carbon(falling, "queues:\n  - name: t\n    carbon_defer: 90m\n",
                              PriorityClass::kBestEffort)
                       .jobs[0]
                       .first_start,
                   5400);
}

TEST(CarbonDeferral, CarbonIsCountedPerJobAndForTheCluster) {
  const std::string series = "time,g_per_kwh\n0,500\n3600,500\n7200,100\n10800,100\n";
  const SimResult r = run_carbon(series, "queues:\n  - name: t\n    carbon_defer: 6h\n",
                                 PriorityClass::kBestEffort);
  ASSERT_TRUE(r.energy.carbon);
  // It ran 7200..9000 at 100 g/kWh, drawing 200 W: 200 x 1800 / 3.6e6 kWh x 100 g/kWh.
  EXPECT_NEAR(r.jobs[0].gpu_carbon_g, 200.0 * 1800 / 3.6e6 * 100, 1e-9);
  EXPECT_NEAR(r.energy.busy_carbon_g, r.jobs[0].gpu_carbon_g, 1e-9);
  EXPECT_GT(r.energy.it_carbon_g, r.energy.busy_carbon_g);
}

}  // namespace
}  // namespace tessera

namespace tessera {
namespace {

TEST(ThermalHeadroom, HighPowerJobsAvoidAHotNodeAndLowPowerJobsUseIt) {
  // node-0 may draw only 100 W above idle. A "ncf" job draws 25 W above idle per GPU, the rest
  // 165.25 W: four ncf jobs fit node-0, no other job does.
  ClusterPower power;
  Cluster c = make_uniform_cluster(1, 1, 2, 4);
  PowerModel::TypeCurves v100;
  v100[""] = PowerCurve({{100, 0.6, 95}, {150, 0.85, 130}, {200, 0.97, 165}, {250, 1.0, 200}});
  v100["ncf"] = PowerCurve({{100, 1.0, 59.75}, {250, 1.0, 59.75}});
  const PowerModel m({{"V100", v100}});
  Workload w;
  w.tenants.intern("t");
  const uint32_t ncf = w.models.intern("ncf");
  for (int i = 0; i < 8; ++i) {
    JobSpec j;
    j.name = "j" + std::to_string(i);
    j.work_seconds = 100;
    j.model = i % 2 == 0 ? ncf : kNoId;
    j.source = "test";
    w.jobs.push_back(j);
  }
  std::vector<std::string> models = {"ncf"};
  const BoundPowerModel bound(m, c.gpu_types(), models);
  PowerView v;
  v.model = &bound;
  v.idle_w = 8 * 34.75;
  v.node_headroom_w = {100, -1};
  const Decisions d = cycle_with_power(c, w, v, make_policy("fifo", 1));
  ASSERT_EQ(d.starts.size(), 8u);
  int ncf_on_hot = 0;
  for (const Start& s : d.starts) {
    const NodeId n = s.alloc.member_node[0];
    if (w.jobs[s.job].model != ncf) {
      EXPECT_EQ(n, 1u) << w.jobs[s.job].name << " is high-power";
    } else {
      ncf_on_hot += n == 0;
    }
  }
  EXPECT_EQ(ncf_on_hot, 4);
  // A ninth high-power job finds no node with the headroom and room: it waits, saying why.
  (void)power;
}

TEST(ClusterPowerYaml, RackCapsAndHeadroomResolveByName) {
  const Cluster c = parse_cluster_yaml(
      "racks: 2\nnodes_per_rack: 2\nnode: {gpus: 4, gpu_type: V100}\n"
      "power:\n  cap_kw: 3\n  node_watts: 250\n  pue: 1.3\n  rack_caps_kw: {rack-1: 1.5}\n"
      "  thermal_headroom_watts: {node-2: 300}\n",
      "c.yaml");
  const ClusterPower& p = c.power();
  EXPECT_DOUBLE_EQ(p.cap_w, 3000);
  EXPECT_DOUBLE_EQ(p.node_base_w, 250);
  EXPECT_DOUBLE_EQ(p.pue, 1.3);
  ASSERT_EQ(p.rack_cap_w.size(), 2u);
  EXPECT_DOUBLE_EQ(p.rack_cap_w[0], -1);
  EXPECT_DOUBLE_EQ(p.rack_cap_w[1], 1500);
  ASSERT_EQ(p.node_headroom_w.size(), 4u);
  EXPECT_DOUBLE_EQ(p.node_headroom_w[2], 300);
  EXPECT_DOUBLE_EQ(p.node_headroom_w[0], -1);
  try {
    parse_cluster_yaml(
        "racks: 1\nnodes_per_rack: 1\nnode: {gpus: 4}\npower:\n  rack_caps_kw: {rack-9: 1}\n",
        "d.yaml");
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("power.rack_caps_kw.rack-9"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(parse_cluster_yaml("racks: 1\nnodes_per_rack: 1\nnode: {gpus: 4}\npower:\n  pue: "
                                  "0.5\n",
                                  "e.yaml"),
               InputError);
}

TEST(RackCap, NoRackDrawsPastItsCap) {
  // Two racks of 2 nodes x 4 GPUs; rack-0 capped at its idle + 2 jobs' worth.
  const Cluster c = make_uniform_cluster(1, 2, 2, 4);
  const PowerModel m = synthetic_model();
  const Workload w = busy_workload();
  Policy p = make_policy("fifo", 1);
  const UnitSpeed model;
  SimOptions opt;
  opt.power = &m;
  const double rack_idle = 2 * (4 * 34.75);
  opt.energy.rack_cap_w = {rack_idle + 2 * 165.25 + 1, kNoPowerCap};
  // The 16-GPU gangs can never run: rack-0 takes at most 2 (a clear error, not a hang); at the
  // lowest limit (95 W, 60.25 W above idle) it would take 5.
  try {
    (void)simulate(w, c, p, model, opt);
    FAIL() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("can never run under the power cap"), std::string::npos)
        << e.what();
  }
  Workload small = w;
  std::erase_if(small.jobs, [](const JobSpec& j) { return j.max_members > 8; });
  std::ostringstream events;
  opt.events = &events;
  (void)simulate(small, c, p, model, opt);
  // Replay the event log: at no time does rack-0 (node-0, node-1) draw past its cap (holding:
  // no running job's limit changes, so each start's limit holds for its run).
  std::istringstream in(events.str());
  std::string line;
  double rack0 = 0, most = 0;
  std::map<std::string, double> held;
  const PowerCurve& curve = m.curve("V100", "");
  while (std::getline(in, line)) {
    const auto j = nlohmann::json::parse(line);
    const std::string type = j["type"];
    const std::string job = j["job"];
    if (type == "start") {
      int k = 0;
      for (const auto& g : j["gpus"]) {
        const std::string s = g;
        k += s.rfind("node-0/", 0) == 0 || s.rfind("node-1/", 0) == 0;
      }
      ASSERT_TRUE(j.contains("power_limit_w")) << line;
      held[job] = k * (curve.power(j["power_limit_w"].get<double>()) - 34.75);
      rack0 += held[job];
      most = std::max(most, rack0);
    } else if (type == "finish" || type == "preempt" || type == "fail" || type == "evict") {
      rack0 -= held[job];
      held[job] = 0;
    }
  }
  EXPECT_LE(rack_idle + most, opt.energy.rack_cap_w[0] + 1e-6);
  EXPECT_GT(most, 0);
}

}  // namespace
}  // namespace tessera
