// The power model (docs/energy.md): curves are monotone and normalised, Zeus's energy
// knob picks the limits it should, unmeasured types are derived sensibly, and the real Zeus
// traces give the curves their data says.
#include "insight/power_model.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "insight/zeus_curves.h"
#include "model/input_error.h"

namespace tessera {
namespace {

TEST(PowerCurve, MonotoneAndNormalisedWhateverTheNoise) {
  // A noisy measurement where 150 W looks faster than 175 W and 200 W draws less than 175 W.
  const PowerCurve c({{200, 2.0, 180}, {100, 1.0, 90}, {150, 1.9, 150}, {175, 1.8, 185}});
  ASSERT_EQ(c.points().size(), 4u);
  EXPECT_DOUBLE_EQ(c.points().back().speed, 1.0);
  for (size_t i = 1; i < c.points().size(); ++i) {
    EXPECT_LE(c.points()[i - 1].speed, c.points()[i].speed);
    EXPECT_LE(c.points()[i - 1].power_w, c.points()[i].power_w);
    EXPECT_LT(c.points()[i - 1].limit_w, c.points()[i].limit_w);
  }
  // Interpolated between points, clamped outside them.
  EXPECT_DOUBLE_EQ(c.speed(50), c.points().front().speed);
  EXPECT_DOUBLE_EQ(c.power(400), c.points().back().power_w);
  EXPECT_GT(c.power(112.5), c.power(100));
  EXPECT_LT(c.power(112.5), c.power(125));
  EXPECT_THROW(PowerCurve(std::vector<PowerPoint>{}), std::invalid_argument);
  EXPECT_THROW(PowerCurve({{100, 0, 50}}), std::invalid_argument);
}

TEST(EnergyKnob, EtaZeroIsFastestEtaOneIsLeastEnergy) {
  // Speed saturates above 150 W while power keeps rising: energy per unit of work is least at
  // 150 W; time is least at 250 W (tie with 200 W broken towards the faster, higher limit).
  const PowerCurve c({{100, 0.6, 95}, {150, 0.95, 130}, {200, 1.0, 170}, {250, 1.0, 200}});
  EXPECT_EQ(energy_optimal_limit(c, 0.0, 250), 250);
  EXPECT_EQ(energy_optimal_limit(c, 1.0, 250), 150);
  // In between, cost = eta*P/s + (1-eta)*250/s: at 0.5, 150 W costs (65+125)/0.95 = 200 and
  // 200 W costs (85+125)/1 = 210.
  EXPECT_EQ(energy_optimal_limit(c, 0.5, 250), 150);
  EXPECT_THROW(energy_optimal_limit(c, 1.5, 250), std::invalid_argument);
  EXPECT_THROW(energy_optimal_limit(c, -0.1, 250), std::invalid_argument);
}

TEST(PowerSpecs, EveryBuiltinTypeHasSourcedFigures) {
  const GpuTypeTable table = GpuTypeTable::builtin();
  const PowerModel model;
  for (size_t t = 0; t < table.size(); ++t) {
    const GpuPowerSpec& s = model.spec(table.at(static_cast<GpuTypeId>(t)).name);
    EXPECT_NE(s.type, "unknown") << table.at(static_cast<GpuTypeId>(t)).name;
    EXPECT_GT(s.idle_w, 0);
    EXPECT_LT(s.idle_w, s.min_limit_w);
    EXPECT_LT(s.min_limit_w, s.tdp_w);
    EXPECT_FALSE(s.source.empty());
    EXPECT_FALSE(s.idle_from.empty());
  }
  // Hardware spellings resolve; anything else is flagged as assumed.
  EXPECT_EQ(model.spec("NVIDIA H100 80GB HBM3").type, "H100");
  EXPECT_EQ(model.spec("NVIDIA A100-SXM4-80GB").type, "A100-80G");
  EXPECT_EQ(model.spec("Tesla V100-SXM2-16GB").type, "V100");
  EXPECT_EQ(model.spec("Radeon Instinct MI50").type, "unknown");
  EXPECT_NE(model.spec("Radeon Instinct MI50").source.find("assumed"), std::string::npos);
}

TEST(PowerModel, WithoutMeasurementsEveryCurveIsFlatAtTdp) {
  const PowerModel model;
  EXPECT_FALSE(model.measured());
  const PowerCurve& c = model.curve("H100", "resnet50");
  EXPECT_DOUBLE_EQ(c.power(300), 700);
  EXPECT_DOUBLE_EQ(c.speed(300), 1.0);
}

TEST(PowerModel, WorkloadNamesMapToZeusWorkloads) {
  EXPECT_EQ(PowerModel::workload_of("ResNet-50"), "resnet50");
  EXPECT_EQ(PowerModel::workload_of("imagenet"), "resnet50");
  EXPECT_EQ(PowerModel::workload_of("cifar10"), "shufflenetv2");
  EXPECT_EQ(PowerModel::workload_of("deepspeech2"), "deepspeech2");
  EXPECT_EQ(PowerModel::workload_of("Recommendation"), "ncf");
  EXPECT_EQ(PowerModel::workload_of("bert"), "bert");
  EXPECT_EQ(PowerModel::workload_of("yolov3"), "");
  EXPECT_EQ(PowerModel::workload_of(""), "");
}

TEST(ZeusCsv, BadInputNamesTheLineAndField) {
  const std::string head =
      "dataset,network,batch_size,optimizer,power_limit,time_per_epoch,average_power\n";
  try {
    parse_zeus_power_csv(head +
                             "imagenet,resnet50,64,adam,150,10,120\nimagenet,resnet50,64,adam,"
                             "x,9,130\n",
                         "p.csv");
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("p.csv:3"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("power_limit"), std::string::npos) << e.what();
  }
  EXPECT_THROW(parse_zeus_power_csv("a,b\n1,2\n", "q.csv"), InputError);
  EXPECT_THROW(parse_zeus_power_csv(head, "r.csv"), InputError);
  // Two configurations, each normalised to its own highest limit before the median.
  const auto curves = parse_zeus_power_csv(head +
                                               "imagenet,resnet50,64,adam,100,20,90\n"
                                               "imagenet,resnet50,64,adam,200,10,170\n"
                                               "imagenet,resnet50,32,adam,100,40,80\n"
                                               "imagenet,resnet50,32,adam,200,30,160\n",
                                           "s.csv");
  ASSERT_TRUE(curves.contains("resnet50"));
  ASSERT_TRUE(curves.contains(""));
  const PowerCurve& c = curves.at("resnet50");
  EXPECT_DOUBLE_EQ(c.speed(100), 0.5 * (0.5 + 0.75));
  EXPECT_DOUBLE_EQ(c.power(200), 165);
}

class ZeusData : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::string(TESSERA_SHARED_DATA);
    if (!std::filesystem::exists(dir_ + "/energy/zeus/summary_power_v100.csv")) {
      GTEST_SKIP() << "no Zeus data under " << dir_;
    }
    model_ = std::make_unique<PowerModel>(load_power_model(dir_));
  }
  std::string dir_;
  std::unique_ptr<PowerModel> model_;
};

TEST_F(ZeusData, MeasuredCurvesLoseSpeedAtLowLimits) {
  ASSERT_TRUE(model_->measured());
  for (const char* type : {"V100", "A40", "P100", "RTX6000"}) {
    const PowerCurve& c = model_->curve(type, "resnet50");
    const GpuPowerSpec& s = model_->spec(type);
    EXPECT_EQ(c.max_limit(), s.tdp_w) << type;
    EXPECT_EQ(c.min_limit(), s.min_limit_w) << type;
    EXPECT_LT(c.speed(c.min_limit()), 0.95) << type;  // ResNet-50 is power-hungry
    EXPECT_LT(c.power(c.min_limit()), c.power(c.max_limit())) << type;
    EXPECT_LE(c.power(c.max_limit()), s.tdp_w) << type;
    EXPECT_GE(c.power(c.min_limit()), s.idle_w * 0.99) << type;
  }
  // NCF barely uses the GPU: a low limit costs it (almost) nothing.
  EXPECT_GT(model_->curve("V100", "ncf").speed(100), 0.95);
  EXPECT_EQ(model_->workloads(),
            (std::vector<std::string>{"bert", "deepspeech2", "ncf", "resnet50", "shufflenetv2"}));
}

TEST_F(ZeusData, EnergyKnobSavesEnergyAsZeusReports) {
  // Zeus reports 15.3-75.8 % energy savings from batch size and power limit together; the
  // power limit alone, at eta = 1, must save energy per unit of work on every measured GPU and
  // power-hungry workload, and cost time.
  for (const char* type : {"V100", "A40", "RTX6000"}) {
    for (const char* w : {"resnet50", "shufflenetv2", "deepspeech2", "bert"}) {
      const PowerCurve& c = model_->curve(type, w);
      const double tdp = model_->spec(type).tdp_w;
      const double l = energy_optimal_limit(c, 1.0, tdp);
      const double e_max = c.power(tdp) / c.speed(tdp);
      const double e_opt = c.power(l) / c.speed(l);
      EXPECT_LT(l, tdp) << type << " " << w;
      EXPECT_LT(e_opt, e_max * 0.97) << type << " " << w;
      EXPECT_EQ(energy_optimal_limit(c, 0.0, tdp), tdp) << type << " " << w;
    }
  }
}

TEST_F(ZeusData, UnmeasuredTypesScaleToTheirOwnTdp) {
  const GpuPowerSpec& h = model_->spec("H100");
  EXPECT_FALSE(h.curves_measured());
  const PowerCurve& c = model_->curve("H100", "resnet50");
  EXPECT_EQ(c.max_limit(), 700);
  EXPECT_EQ(c.min_limit(), 200);
  EXPECT_GT(c.power(700), 0.6 * 700);
  EXPECT_LE(c.power(700), 700);
  EXPECT_LT(c.speed(200), c.speed(450));
  // A V100 variant runs on the V100's measured curves.
  EXPECT_DOUBLE_EQ(model_->curve("V100-32G", "bert").speed(150),
                   model_->curve("V100", "bert").speed(150));
  EXPECT_TRUE(model_->spec("V100-32G").curves_measured());
  // A bound model finds the same curves by id.
  GpuTypeTable types = GpuTypeTable::builtin();
  const BoundPowerModel bound(*model_, types, {"imagenet", "yolov3"});
  const GpuTypeId v100 = types.known("V100");
  EXPECT_EQ(&bound.curve(v100, 0), &model_->curve("V100", "resnet50"));
  EXPECT_EQ(&bound.curve(v100, 1), &model_->curve("V100", ""));
  EXPECT_EQ(&bound.curve(v100, kNoId), &model_->curve("V100", ""));
  EXPECT_EQ(bound.spec(v100).type, "V100");
}

}  // namespace
}  // namespace tessera
