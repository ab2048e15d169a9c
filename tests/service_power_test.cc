// Power policies in serve: a power cap holds jobs (reason PowerCap) or, with
// --power-shifting, lowers running and starting jobs' GPU power limits; limits rise again as
// power frees, survive a restart, drive the energy estimates, and with --apply-power-limits are
// set on real GPUs with nvidia-smi. A job that could never run under the cap is refused.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "api/prometheus.h"
#include "insight/power_model.h"
#include "service_fixture.h"

namespace tessera {
namespace {

constexpr double kTdp = 250, kIdle = 34.75;  // a V100

// A measured-looking V100 curve (the median, which serve's jobs use): power = the limit.
std::shared_ptr<const PowerModel> test_model() {
  PowerModel::TypeCurves v100;
  v100[""] = PowerCurve({{100, 0.55, 100}, {150, 0.75, 150}, {200, 0.92, 200}, {250, 1, 250}});
  return std::make_shared<const PowerModel>(
      std::map<std::string, PowerModel::TypeCurves>{{"V100", v100}});
}

class ServicePower : public ServiceTest {
 protected:
  // A service on `gpus` virtual V100s with the test curve; `set` adjusts the options, `procs`
  // are the processes that outlived a restart.
  ServiceOptions v100_options(int gpus, const std::function<void(ServiceOptions&)>& set) {
    ServiceOptions o = options(gpus);
    o.virtual_gpu_type = "V100";
    o.power_model = test_model();
    if (set) set(o);
    return o;
  }
  std::unique_ptr<Service> make_v100(int gpus, const std::function<void(ServiceOptions&)>& set,
                                     const std::map<int64_t, FakeBackend::Proc>& procs = {}) {
    auto b = std::make_unique<FakeBackend>();
    b->procs = procs;
    backend_ = b.get();
    return std::make_unique<Service>(v100_options(gpus, set), std::move(b));
  }
  static JobView view(Service& s, int64_t id) { return s.job(Caller{true, ""}, id); }
  // The limit a job runs at, TDP for the default.
  static double limit(Service& s, int64_t id) {
    const double w = view(s, id).row.power_limit_w;
    return w > 0 ? w : kTdp;
  }
  static std::vector<std::string> power_events(Service& s, int64_t id) {
    std::vector<std::string> out;
    for (const JobEvent& e : s.job_events(Caller{true, ""}, id)) {
      if (e.type == "PowerLimit") out.push_back(e.message);
    }
    return out;
  }
  // The estimated draw of what runs (W): idle GPUs plus each job's increment at its limit.
  static double estimated_draw(Service& s, int gpus, const std::vector<int64_t>& running) {
    double w = gpus * kIdle;
    for (const int64_t id : running) w += limit(s, id) - kIdle;  // power = limit on this curve
    return w;
  }
};

TEST_F(ServicePower, UnderACapThatFitsOneJobTheSecondWaitsWithReasonPowerCap) {
  // Idle 69.5 W; one job at TDP adds 215.25 W (284.75 W), two would draw 500 W.
  auto s = make_v100(2, [](ServiceOptions& o) { o.power_cap = "0.3"; });
  const int64_t a = submit_and_tick(*s, "team-a", "a", 1);
  const int64_t b = submit_and_tick(*s, "team-b", "b", 1);
  EXPECT_EQ(state(*s, a), JobState::kRunning);
  EXPECT_EQ(limit(*s, a), kTdp);  // holding lowers nothing
  EXPECT_EQ(view(*s, a).row.power_limit_w, 0);
  const JobView v = view(*s, b);
  ASSERT_EQ(v.row.state, JobState::kPending);
  EXPECT_EQ(v.reason_code, "PowerCap");
  EXPECT_NE(v.pending_reason.find("power cap"), std::string::npos) << v.pending_reason;
  EXPECT_NE(v.pending_reason.find("0.3 kW"), std::string::npos) << v.pending_reason;
  // Its history says why it waits.
  bool recorded = false;
  for (const JobEvent& e : s->job_events(Caller{true, ""}, b)) {
    recorded = recorded || (e.type == "Pending" && e.message.starts_with("PowerCap: "));
  }
  EXPECT_TRUE(recorded);
  // a ends: b starts.
  backend_->exit(static_cast<uint64_t>(a), 0, 0);
  now_ += 10;
  s->tick();
  s->tick();
  EXPECT_EQ(state(*s, b), JobState::kRunning);
}

TEST_F(ServicePower, WithPowerShiftingBothRunBelowTdpWithinTheCapAndTheSurvivorRisesLater) {
  auto s = make_v100(2, [](ServiceOptions& o) {
    o.power_cap = "0.31";
    o.power_shifting = true;
  });
  const int64_t a = submit_and_tick(*s, "team-a", "a", 1);
  ASSERT_EQ(state(*s, a), JobState::kRunning);
  EXPECT_EQ(limit(*s, a), kTdp);
  const int64_t b = submit_and_tick(*s, "team-b", "b", 1);
  ASSERT_EQ(state(*s, b), JobState::kRunning);
  EXPECT_LT(limit(*s, a), kTdp);
  EXPECT_LT(limit(*s, b), kTdp);
  EXPECT_LE(estimated_draw(*s, 2, {a, b}), 310 + 1e-6);
  // The GPUs' estimated draw in /metrics agrees.
  const ServiceMetrics m = s->metrics();
  EXPECT_LE(m.power_watts, 310 + 1e-6);
  EXPECT_NEAR(m.power_watts, limit(*s, a) + limit(*s, b), 1e-6);
  // Each change is in the job's history, and in its JSON view.
  const std::vector<std::string> ea = power_events(*s, a);
  ASSERT_EQ(ea.size(), 1u);
  EXPECT_EQ(ea[0], fmt::format("power limit {:.0f} W (power cap)", limit(*s, a)));
  const std::vector<std::string> eb = power_events(*s, b);
  ASSERT_EQ(eb.size(), 1u);
  EXPECT_EQ(eb[0], fmt::format("power limit {:.0f} W (power cap)", limit(*s, b)));
  // a ends: b's limit rises back to the TDP, the default.
  const double b_before = limit(*s, b);
  backend_->exit(static_cast<uint64_t>(a), 0, 0);
  now_ += 10;
  s->tick();
  s->tick();
  EXPECT_GT(limit(*s, b), b_before);
  EXPECT_EQ(view(*s, b).row.power_limit_w, 0);
  const std::vector<std::string> eb2 = power_events(*s, b);
  ASSERT_EQ(eb2.size(), 2u);
  EXPECT_EQ(eb2[1], "power limit 250 W (raised: power freed)");
}

TEST_F(ServicePower, EnergyIsEstimatedAtTheJobsLimitOverEachPartOfItsRun) {
  auto s = make_v100(2, [](ServiceOptions& o) {
    o.power_cap = "0.31";
    o.power_shifting = true;
  });
  const int64_t a = submit_and_tick(*s, "team-a", "a", 1);
  now_ += 99;  // 100 s at TDP since its start
  const int64_t b = submit_and_tick(*s, "team-b", "b", 1);
  const double la = limit(*s, a);
  ASSERT_LT(la, kTdp);
  now_ += 1000;
  backend_->exit(static_cast<uint64_t>(a), 0, 0);
  s->tick();
  // a: 100 s at 250 W, then 1000 s at its lowered limit (this curve draws its limit).
  const double want = 100 * kTdp + 1000 * la;
  double got = -1;
  for (const UsageRow& r : s->usage(Caller{true, ""}, 0, now_ + 1)) {
    if (r.tenant == "team-a") got = r.energy_kwh * 3.6e6;
  }
  EXPECT_NEAR(got, want, 1e-3);
  EXPECT_EQ(state(*s, b), JobState::kRunning);
}

TEST_F(ServicePower, LimitsSurviveARestart) {
  const auto shifting = [](ServiceOptions& o) {
    o.power_cap = "0.31";
    o.power_shifting = true;
  };
  int64_t a = 0, b = 0;
  double la = 0, lb = 0;
  std::map<int64_t, FakeBackend::Proc> procs;
  {
    auto s = make_v100(2, shifting);
    a = submit_and_tick(*s, "team-a", "a", 1);
    b = submit_and_tick(*s, "team-b", "b", 1);
    la = limit(*s, a);
    lb = limit(*s, b);
    ASSERT_LT(la, kTdp);
    ASSERT_LT(lb, kTdp);
    procs = backend_->procs;
  }
  auto s = make_v100(2, shifting, procs);
  EXPECT_EQ(state(*s, a), JobState::kRunning);
  EXPECT_EQ(limit(*s, a), la);
  EXPECT_EQ(limit(*s, b), lb);
  now_ += 5;
  s->tick();
  EXPECT_EQ(limit(*s, a), la);
  EXPECT_EQ(limit(*s, b), lb);
  EXPECT_EQ(power_events(*s, a).size(), 1u);  // nothing changed, nothing recorded
  EXPECT_NEAR(s->metrics().power_watts, la + lb, 1e-6);
}

TEST_F(ServicePower, AJobThatCouldNeverRunUnderTheCapIsRefusedAtSubmission) {
  // 100 W leaves 30.5 W above idle; a GPU at its lowest limit (100 W) adds 65.25 W.
  auto s = make_v100(2, [](ServiceOptions& o) { o.power_cap = "0.1"; });
  try {
    s->submit(as("team-a"), job("name: x\nresources: {gpus: 1}\ncommand: [x]\n"), "", nullptr);
    FAIL() << "accepted";
  } catch (const ServiceError& e) {
    EXPECT_EQ(e.kind(), ServiceError::kInfeasible);
    EXPECT_EQ(e.field(), "resources");
    EXPECT_NE(std::string(e.what()).find("can never run under the power cap"), std::string::npos)
        << e.what();
  }
}

TEST_F(ServicePower, AnEnergyWeightAloneSetsLimits) {
  // eta 1: the limit that spends least energy per unit of work (power / speed: 100 W here).
  auto s = make_v100(2, [](ServiceOptions& o) { o.energy_weight = 1; });
  const int64_t a = submit_and_tick(*s, "team-a", "a", 1);
  const double want = energy_optimal_limit(test_model()->curve("V100", ""), 1, kTdp);
  ASSERT_LT(want, kTdp);
  EXPECT_EQ(view(*s, a).row.power_limit_w, want);
  const std::vector<std::string> e = power_events(*s, a);
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(e[0], fmt::format("power limit {:.0f} W (energy weight 1)", want));
}

TEST_F(ServicePower, WithoutACapOrAnEnergyWeightNoLimitIsSet) {
  auto s = make_v100(2, {});
  const int64_t a = submit_and_tick(*s, "team-a", "a", 1);
  const int64_t b = submit_and_tick(*s, "team-b", "b", 1);
  for (const int64_t id : {a, b}) {
    EXPECT_EQ(state(*s, id), JobState::kRunning);
    EXPECT_EQ(view(*s, id).row.power_limit_w, 0);
    EXPECT_TRUE(power_events(*s, id).empty());
  }
  EXPECT_NEAR(s->metrics().power_watts, 2 * kTdp, 1e-6);
}

TEST_F(ServicePower, StartupRefusesPowerOptionsThatCannotWork) {
  const auto refused = [&](const std::function<void(ServiceOptions&)>& set, int gpus = 2) {
    try {
      auto s = make_v100(gpus, set);
      return std::string("accepted");
    } catch (const std::exception& e) {
      return std::string(e.what());
    }
  };
  EXPECT_NE(refused([](ServiceOptions& o) {
              o.power_shifting = true;
            }).find("--power-shifting needs --power-cap"),
            std::string::npos);
  EXPECT_NE(refused([](ServiceOptions& o) {
              o.power_cap = "0.05";
            }).find("below this host's idle draw of 0.070 kW"),
            std::string::npos);
  EXPECT_NE(refused([](ServiceOptions& o) { o.power_cap = "lots"; }).find("--power-cap: expected"),
            std::string::npos);
  EXPECT_NE(refused([](ServiceOptions& o) { o.power_cap = "120%"; }).find("--power-cap"),
            std::string::npos);
  EXPECT_NE(refused([](ServiceOptions& o) {
              o.power_cap = "50%";
              o.virtual_gpu_type = "virtual";
            }).find("no power figures"),
            std::string::npos);
  EXPECT_NE(refused([](ServiceOptions& o) {
              o.apply_power_limits = true;
              o.root = true;
            }).find("virtual GPUs"),
            std::string::npos);
  EXPECT_EQ(refused([](ServiceOptions& o) { o.power_cap = "50%"; }), "accepted");
}

// Real GPUs (a stand-in nvidia-smi) and a fake command runner: the exact commands.
class ServicePowerApplied : public ServicePower {
 protected:
  std::unique_ptr<Service> make_real(bool root) {
    const std::string smi = dir_.file("nvidia-smi");
    std::ofstream(smi) << "#!/bin/sh\n"
                          "echo '0, GPU-a, Tesla V100-PCIE-16GB, 16160, 0, 0, 0'\n"
                          "echo '1, GPU-b, Tesla V100-PCIE-16GB, 16160, 0, 0, 0'\n";
    std::filesystem::permissions(smi, std::filesystem::perms::owner_all);
    smi_ = smi;
    return make_v100(0, [&](ServiceOptions& o) {
      o.nvidia_smi = smi;
      o.power_cap = "0.31";
      o.power_shifting = true;
      o.apply_power_limits = true;
      o.root = root;
      o.run_command = [this](const std::vector<std::string>& argv) {
        std::string line;
        for (const std::string& a : argv) line += (line.empty() ? "" : " ") + a;
        if (argv.size() > 1 && argv[1].starts_with("--query-gpu=")) {
          queries_.push_back(line);
          return CommandResult{0,
                               "0, 250.00, 250.00, 100.00, 250.00\n"
                               "1, 250.00, 250.00, 100.00, 250.00\n"};
        }
        commands_.push_back(line);
        return CommandResult{0, ""};
      };
    });
  }
  std::string smi_;
  std::vector<std::string> queries_, commands_;
};

TEST_F(ServicePowerApplied, NvidiaSmiSetsEachJobsLimitOnItsGpusAndTheDefaultWhenItEnds) {
  auto s = make_real(true);
  ASSERT_EQ(queries_.size(), 1u);
  EXPECT_EQ(queries_[0], smi_ +
                             " --query-gpu=index,power.limit,power.default_limit,power.min_limit,"
                             "power.max_limit --format=csv,noheader,nounits");
  const int64_t a = submit_and_tick(*s, "team-a", "a", 1);
  EXPECT_TRUE(commands_.empty());  // at its TDP, as the GPU already is
  const int64_t b = submit_and_tick(*s, "team-b", "b", 1);
  ASSERT_EQ(state(*s, b), JobState::kRunning);
  const int ga = view(*s, a).placement.at(0).gpus.at(0);
  const int gb = view(*s, b).placement.at(0).gpus.at(0);
  ASSERT_NE(ga, gb);
  const auto pl = [&](int gpu, double w) {
    return fmt::format("{} -i {} -pl {:.0f}", smi_, gpu, w);
  };
  // By GPU index.
  EXPECT_EQ(commands_,
            (std::vector<std::string>{pl(std::min(ga, gb), limit(*s, ga < gb ? a : b)),
                                      pl(std::max(ga, gb), limit(*s, ga < gb ? b : a))}));
  commands_.clear();
  // a ends: its GPU goes back to the default, and b's limit rises to it.
  backend_->exit(static_cast<uint64_t>(a), 0, 0);
  now_ += 10;
  s->tick();
  s->tick();
  ASSERT_EQ(limit(*s, b), kTdp);
  EXPECT_EQ(commands_, (std::vector<std::string>{pl(ga, 250), pl(gb, 250)}));
}

TEST_F(ServicePowerApplied, RefusedWithoutRoot) {
  try {
    make_real(false);
    FAIL() << "accepted";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("--apply-power-limits needs root"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace tessera

namespace tessera {
namespace {

TEST_F(ServiceTest, ABestEffortJobWaitsForACleanerHourWithinItsQueuesCarbonDefer) {
  // Dirty until t=3600, clean after; team-be's jobs are best-effort and may wait 2 h.
  const std::string queues = dir_.file("queues.yaml");
  std::ofstream(queues) << "queues:\n  - name: team-be\n    default_priority_class: best-effort\n"
                           "    carbon_defer: 2h\n  - name: team-a\n";
  ServiceOptions o = options(2);
  o.queues_path = queues;
  o.carbon = std::make_shared<const CarbonIntensity>(
      CarbonIntensity::parse("time,g_per_kwh\n0,500\n3600,100\n7200,100\n", "carbon.csv",
                             CarbonIntensity::TimeBase::kAbsolute));
  auto b = std::make_unique<FakeBackend>();
  backend_ = b.get();
  Service s(o, std::move(b));
  const int64_t be = submit_and_tick(s, "team-be", "be", 1);
  const int64_t a = submit_and_tick(s, "team-a", "a", 1);
  EXPECT_EQ(state(s, a), JobState::kRunning);  // not best-effort: never waits for carbon
  const JobView v = s.job(Caller{true, ""}, be);
  ASSERT_EQ(v.row.state, JobState::kPending);
  EXPECT_EQ(v.reason_code, "CarbonDefer");
  EXPECT_NE(v.pending_reason.find("cleaner"), std::string::npos) << v.pending_reason;
  now_ = 3601;
  s.tick();
  EXPECT_EQ(state(s, be), JobState::kRunning);
}

}  // namespace
}  // namespace tessera

namespace tessera {
namespace {

// --thermal-limit on real GPUs (a stand-in nvidia-smi that prints what the test writes): the
// host's thermal headroom from each reading decides what may start.
class ServiceThermal : public ServicePower {
 protected:
  // Both GPUs at `celsius` drawing `watts` from the next reading on.
  void set_reading(double celsius, double watts) {
    std::ofstream out(dir_.file("reading"));
    for (int i = 0; i < 2; ++i) {
      out << fmt::format("{}, GPU-{}, Tesla V100-PCIE-16GB, 16160, 0, 0, 0, {:.2f}, 250.00, {}\n",
                         i, i, watts, celsius);
    }
  }
  std::unique_ptr<Service> make_real(const std::function<void(ServiceOptions&)>& set = {}) {
    const std::string smi = dir_.file("nvidia-smi");
    std::ofstream(smi) << "#!/bin/sh\ncat '" << dir_.file("reading") << "'\n";
    std::filesystem::permissions(smi, std::filesystem::perms::owner_all);
    return make_v100(0, [&](ServiceOptions& o) {
      o.nvidia_smi = smi;
      o.thermal_limit_c = 80;
      o.inlet_temp_c = 25;
      if (set) set(o);
    });
  }
  static double metric(Service& s, const std::string& name, const std::string& labels = "") {
    std::istringstream in(render_prometheus(s.metrics()));
    std::string line;
    while (std::getline(in, line)) {
      if (!line.starts_with(name + "{") && !line.starts_with(name + " ")) continue;
      if (!labels.empty() && line.find(labels) == std::string::npos) continue;
      return std::stod(line.substr(line.rfind(' ') + 1));
    }
    return -1;
  }
};

TEST_F(ServiceThermal, AHotHostHoldsWorkUntilItCoolsAndACoolOneTakesWhatItsHeadroomAllows) {
  // 70 °C at 50 W over a 25 °C inlet: R = 0.9 °C/W, so each GPU could draw 61.1 W at 80 °C,
  // 26.4 W above idle; a job at TDP adds 215.25 W.
  set_reading(70, 50);
  auto s = make_real();
  const int64_t a = submit_and_tick(*s, "team-a", "a", 1);
  JobView v = view(*s, a);
  ASSERT_EQ(v.row.state, JobState::kPending);
  EXPECT_EQ(v.reason_code, "PowerCap");
  EXPECT_NE(v.pending_reason.find("thermal headroom"), std::string::npos) << v.pending_reason;
  EXPECT_NEAR(metric(*s, "tessera_thermal_headroom_watts"), 2 * (50 * 55.0 / 45 - kIdle), 0.01);
  EXPECT_EQ(metric(*s, "tessera_gpu_temperature_celsius", "gpu=\"1\""), 70);
  // Cooler (40 °C at 50 W: R = 0.3, 183.3 W each at the limit): 297 W of headroom, room for one
  // job at TDP but not two.
  set_reading(40, 50);
  now_ += 10;  // the next reading is due
  s->tick();
  EXPECT_EQ(state(*s, a), JobState::kRunning);
  EXPECT_NEAR(metric(*s, "tessera_thermal_headroom_watts"), 2 * (50 * 55.0 / 15 - kIdle), 0.01);
  const int64_t b = submit_and_tick(*s, "team-b", "b", 1);
  v = view(*s, b);
  ASSERT_EQ(v.row.state, JobState::kPending);
  EXPECT_EQ(v.reason_code, "PowerCap");
}

TEST_F(ServiceThermal, WithoutALimitTemperaturesAreReportedAndConstrainNothing) {
  set_reading(85, 50);
  auto s = make_real([](ServiceOptions& o) { o.thermal_limit_c = 0; });
  const int64_t a = submit_and_tick(*s, "team-a", "a", 1);
  EXPECT_EQ(state(*s, a), JobState::kRunning);
  EXPECT_EQ(metric(*s, "tessera_gpu_temperature_celsius", "gpu=\"0\""), 85);
  EXPECT_EQ(metric(*s, "tessera_thermal_headroom_watts"), -1);  // not exported
}

TEST_F(ServiceThermal, StartupRefusesALimitThatCannotWork) {
  const auto refused = [&](const std::function<void(ServiceOptions&)>& set) {
    try {
      make_v100(2, set);  // virtual GPUs
      return std::string("accepted");
    } catch (const std::exception& e) {
      return std::string(e.what());
    }
  };
  EXPECT_NE(refused([](ServiceOptions& o) { o.thermal_limit_c = 80; }).find("virtual GPUs"),
            std::string::npos);
  set_reading(40, 50);
  try {
    make_real([](ServiceOptions& o) { o.inlet_temp_c = 90; });
    FAIL() << "accepted";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("--inlet-temp (90 °C) must be below --thermal-limit"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace tessera
