// Energy in serve: each tenant's estimated GPU energy in /metrics and in usage, kept
// across a restart; each GPU's power, estimated or measured with nvidia-smi; the cluster's power
// with node base power and PUE; carbon from an intensity series.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>

#include "api/prometheus.h"
#include "control/energy.h"
#include "insight/zeus_curves.h"
#include "model/accounting_json.h"
#include "service_fixture.h"

namespace tessera {
namespace {

class ServiceEnergy : public ServiceTest {
 protected:
  // A service on `gpus` virtual V100s (power model: none given, so flat curves at the TDP:
  // a V100 running a job draws 250 W, an idle one 34.75 W).
  // `procs`: the processes that survived a restart.
  std::unique_ptr<Service> make_v100(int gpus, const std::function<void(ServiceOptions&)>& set = {},
                                     const std::map<int64_t, FakeBackend::Proc>& procs = {}) {
    ServiceOptions o = options(gpus);
    o.virtual_gpu_type = "V100";
    if (set) set(o);
    auto b = std::make_unique<FakeBackend>();
    b->procs = procs;
    backend_ = b.get();
    return std::make_unique<Service>(o, std::move(b));
  }
  // The value of the sample of `metric` whose labels contain `labels`, from /metrics' text;
  // -1 when absent.
  static double sample(const std::string& text, const std::string& metric,
                       const std::string& labels = "") {
    std::istringstream in(text);
    std::string line;
    while (std::getline(in, line)) {
      if (!line.starts_with(metric + "{") && !line.starts_with(metric + " ")) continue;
      if (!labels.empty() && line.find(labels) == std::string::npos) continue;
      return std::stod(line.substr(line.rfind(' ') + 1));
    }
    return -1;
  }
  static double usage_kwh(Service& s, const std::string& tenant, double since, double until) {
    for (const UsageRow& r : s.usage(Caller{true, ""}, since, until)) {
      // As GET /v1/usage writes it.
      const nlohmann::json j = usage_row_json<nlohmann::json>(r);
      if (r.tenant == tenant) return j.value("energy_kwh", -1.0);
    }
    return -1;
  }
};

constexpr double kV100Tdp = 250, kV100Idle = 34.75;

TEST_F(ServiceEnergy, ATenantsEnergyIsItsJobsDrawOverTheirTimeInMetricsAndUsage) {
  auto s = make_v100(4);
  const double t0 = now_;
  const int64_t id = submit_and_tick(*s, "team-a", "train", 2);
  ASSERT_EQ(state(*s, id), JobState::kRunning);
  const double started = now_;
  now_ += 3600;
  s->tick();
  const std::string text = render_prometheus(s->metrics());
  // Two GPUs at 250 W for an hour.
  EXPECT_NEAR(sample(text, "tessera_energy_joules_total", "tenant=\"team-a\""), 2 * kV100Tdp * 3600,
              1.0)
      << text;
  EXPECT_NEAR(usage_kwh(*s, "team-a", t0 - 10, now_), 2 * kV100Tdp / 1000, 1e-6);
  // Each GPU: the two held at the estimate, the two free at idle power.
  EXPECT_NEAR(sample(text, "tessera_gpu_power_watts", "gpu=\"0\",source=\"estimated\""), kV100Tdp,
              1e-9)
      << text;
  EXPECT_NEAR(sample(text, "tessera_gpu_power_watts", "gpu=\"3\",source=\"estimated\""), kV100Idle,
              1e-9);
  EXPECT_NEAR(sample(text, "tessera_power_watts"), 2 * kV100Tdp + 2 * kV100Idle, 1e-6);
  // It ends after another half hour: the counter and usage keep what it used, and no more.
  now_ += 1800;
  backend_->exit(id, 0, 0);
  backend_->exit(id, 1, 0);
  s->tick();
  ASSERT_EQ(state(*s, id), JobState::kSucceeded);
  now_ += 3600;
  s->tick();
  const double joules = 2 * kV100Tdp * (now_ - 3600 - started);
  EXPECT_NEAR(
      sample(render_prometheus(s->metrics()), "tessera_energy_joules_total", "tenant=\"team-a\""),
      joules, 1.0);
  EXPECT_NEAR(usage_kwh(*s, "team-a", t0 - 10, now_), joules / 3.6e6, 1e-6);
  // A window that holds half of its run holds half of its energy.
  EXPECT_NEAR(usage_kwh(*s, "team-a", started, started + 2700), joules / 2 / 3.6e6, 1e-6);

  // A restart reads the energy back from the run records, and a job running across it goes on
  // counting from its start.
  const int64_t b = submit_and_tick(*s, "team-b", "serve", 1);
  ASSERT_EQ(state(*s, b), JobState::kRunning);
  now_ += 600;
  s->tick();
  const double b_before =
      sample(render_prometheus(s->metrics()), "tessera_energy_joules_total", "tenant=\"team-b\"");
  EXPECT_NEAR(b_before, kV100Tdp * 600, 1.0);
  const std::map<int64_t, FakeBackend::Proc> survivors = backend_->procs;
  s.reset();  // the server goes away for a minute; team-b's job runs on
  now_ += 60;
  auto again = make_v100(4, {}, survivors);
  ASSERT_EQ(state(*again, b), JobState::kRunning);
  const std::string after = render_prometheus(again->metrics());
  EXPECT_NEAR(sample(after, "tessera_energy_joules_total", "tenant=\"team-a\""), joules, 1.0)
      << after;
  EXPECT_NEAR(sample(after, "tessera_energy_joules_total", "tenant=\"team-b\""), kV100Tdp * 660,
              1.0)
      << after;
  // It ends: its whole run, the minute the server was down included, stays counted.
  now_ += 60;
  backend_->exit(b, 0, 0);
  again->tick();
  ASSERT_EQ(state(*again, b), JobState::kSucceeded);
  now_ += 600;
  EXPECT_NEAR(again->metrics().energy_joules.at("team-b"), kV100Tdp * 720, 1.0);
  EXPECT_NEAR(usage_kwh(*again, "team-b", t0, now_), kV100Tdp * 720 / 3.6e6, 1e-6);
}

TEST_F(ServiceEnergy, TheCounterNeverGoesDownWhenARunsEndIsLearntLate) {
  EnergyCounters c;
  c.restore({{"a", 100}});
  EXPECT_DOUBLE_EQ(c.read({{"a", 50}}).at("a"), 150);
  // The run ended before that read (its exit time): less than was shown.
  c.add_ended("a", 40);
  EXPECT_DOUBLE_EQ(c.read({}).at("a"), 150);
  c.add_ended("a", 20);
  EXPECT_DOUBLE_EQ(c.read({}).at("a"), 160);
}

TEST_F(ServiceEnergy, NodeBasePowerAndPueAddToTheClustersPower) {
  auto s = make_v100(2, [](ServiceOptions& o) {
    o.node_power_w = 400;
    o.pue = 1.5;
  });
  EXPECT_NEAR(s->metrics().power_watts, (2 * kV100Idle + 400) * 1.5, 1e-9);
  EXPECT_THROW(make_v100(2, [](ServiceOptions& o) { o.pue = 0.9; }), std::invalid_argument);
  EXPECT_THROW(make_v100(2, [](ServiceOptions& o) { o.node_power_w = -1; }), std::invalid_argument);
}

TEST_F(ServiceEnergy, VirtualGpusOfNoKnownTypeDrawNothing) {
  auto s = make(2);  // type "virtual"
  const int64_t id = submit_and_tick(*s, "team-a", "x", 1);
  ASSERT_EQ(state(*s, id), JobState::kRunning);
  now_ += 3600;
  const ServiceMetrics m = s->metrics();
  EXPECT_TRUE(m.energy);
  EXPECT_EQ(m.power_watts, 0);
  ASSERT_EQ(m.gpu_power.size(), 2u);
  EXPECT_EQ(m.gpu_power[0].watts, 0);
  EXPECT_NEAR(usage_kwh(*s, "team-a", 0, now_), 0, 1e-12);  // known: nothing estimated
}

TEST_F(ServiceEnergy, TheZeusMedianCurveGivesTheDrawAtTdp) {
  const PowerModel model = load_power_model(TESSERA_SHARED_DATA);
  if (!model.measured()) GTEST_SKIP() << "no Zeus data in " << TESSERA_SHARED_DATA;
  const double per_gpu = model.curve("V100", "").power(kV100Tdp);
  EXPECT_NEAR(estimated_gpu_watts(model, "V100"), per_gpu, 1e-9);
  EXPECT_LT(per_gpu, kV100Tdp + 1e-9);
  EXPECT_GT(per_gpu, kV100Idle);
  auto s = make_v100(
      2, [&](ServiceOptions& o) { o.power_model = std::make_shared<const PowerModel>(model); });
  const int64_t id = submit_and_tick(*s, "team-a", "train", 2);
  ASSERT_EQ(state(*s, id), JobState::kRunning);
  now_ += 3600;
  const auto m = s->metrics();
  EXPECT_NEAR(m.energy_joules.at("team-a"), 2 * per_gpu * 3600, 1.0);
  // A half share draws half the estimate, but never less than idle.
  EXPECT_NEAR(estimated_gpu_draw(model, "V100", 500), std::max(kV100Idle, per_gpu / 2), 1e-9);
  EXPECT_NEAR(estimated_gpu_draw(model, "V100", 10), kV100Idle, 1e-9);
  EXPECT_NEAR(estimated_gpu_draw(model, "V100", 0), kV100Idle, 1e-9);
}

TEST_F(ServiceEnergy, UsageCarriesTheCarbonOfTheEnergyUnderTheSeries) {
  // 100 g/kWh until the hour after now_, 500 after.
  const double hour = std::floor(now_ / 3600) * 3600;
  auto series = std::make_shared<const CarbonIntensity>(
      std::vector<CarbonIntensity::Point>{{hour, 100}, {hour + 3600, 500}},
      CarbonIntensity::TimeBase::kAbsolute);
  auto s = make_v100(2, [&](ServiceOptions& o) { o.carbon = series; });
  const int64_t id = submit_and_tick(*s, "team-a", "x", 2);
  ASSERT_EQ(state(*s, id), JobState::kRunning);
  const double started = now_;
  now_ += 7200;
  const auto rows = s->usage(Caller{true, ""}, started - 1, now_);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_NEAR(rows[0].energy_kwh, 2 * kV100Tdp * 2 / 1000, 1e-9);
  EXPECT_NEAR(rows[0].carbon_kg, series->grams(2 * kV100Tdp, started, now_) / 1000, 1e-9);
  EXPECT_GT(rows[0].carbon_kg, 0);
  EXPECT_TRUE(usage_row_json<nlohmann::json>(rows[0]).contains("carbon_kg"));
}

// A job whose processes did not outlive a restart is requeued; its run is recorded up to the
// restart (its GPUs were held for it until then), so usage and energy keep it.
TEST_F(ServiceEnergy, ARunWhoseProcessesVanishedAcrossARestartIsKeptInUsage) {
  auto s = make_v100(2);
  const int64_t id = submit_and_tick(*s, "team-a", "train", 1);
  ASSERT_EQ(state(*s, id), JobState::kRunning);
  const double started = now_;
  s.reset();  // the server goes away, and the job's processes with it
  now_ += 3600;
  auto again = make_v100(2);
  EXPECT_EQ(state(*again, id), JobState::kPending);
  const auto rows = again->usage(Caller{true, ""}, started - 1, now_ + 1);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_NEAR(rows[0].gpu_hours.at("V100"), 1.0, 1e-9);
  EXPECT_NEAR(rows[0].energy_kwh, kV100Tdp / 1000, 1e-9);
  EXPECT_NEAR(sample(render_prometheus(again->metrics()), "tessera_energy_joules_total",
                     "tenant=\"team-a\""),
              kV100Tdp * 3600, 1.0);
}

// A stand-in nvidia-smi with the power fields: GPU 0 draws 312.5 W, GPU 1 does not say.
TEST_F(ServiceEnergy, RealGpusReportTheirMeasuredDraw) {
  const std::string smi = dir_.file("nvidia-smi");
  std::ofstream(smi) << "#!/bin/sh\n"
                        "echo '0, GPU-a, NVIDIA H100 80GB HBM3, 81559, 0, 0, 0, 312.50, 700.00'\n"
                        "echo '1, GPU-b, NVIDIA H100 80GB HBM3, 81559, 0, 0, 0, [N/A], 700.00'\n";
  std::filesystem::permissions(smi, std::filesystem::perms::owner_all);
  ServiceOptions o = options(0);
  o.nvidia_smi = smi;
  auto b = std::make_unique<FakeBackend>();
  backend_ = b.get();
  Service s(o, std::move(b));
  s.tick();  // reads the power
  const std::string text = render_prometheus(s.metrics());
  EXPECT_NEAR(sample(text, "tessera_gpu_power_watts", "gpu=\"0\",source=\"measured\""), 312.5, 1e-9)
      << text;
  // No reading: the estimate (an idle H100).
  const double h100_idle = PowerModel().spec("H100").idle_w;
  EXPECT_NEAR(sample(text, "tessera_gpu_power_watts", "gpu=\"1\",source=\"estimated\""), h100_idle,
              1e-9)
      << text;
  EXPECT_NEAR(sample(text, "tessera_power_watts"), 312.5 + h100_idle, 1e-6);
}

}  // namespace
}  // namespace tessera
