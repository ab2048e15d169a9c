// The thermal headroom model (insight/thermal_headroom.h): steady state T = T_inlet + R × P,
// R from one reading, the headroom the power a GPU can add before it passes the limit.
#include "insight/thermal_headroom.h"

#include <gtest/gtest.h>

namespace tessera {
namespace {

constexpr double kIdle = 34.75, kTdp = 250;  // a V100

GpuThermalReading reading(double temperature_c, double draw_w) {
  return GpuThermalReading{temperature_c, draw_w, kIdle, kTdp};
}

TEST(ThermalHeadroom, ACoolerGpuCanDrawMoreBeforeItPassesTheLimit) {
  // 60 °C at 70 W over a 25 °C inlet: R = 0.5 °C/W; at the 80 °C limit it draws 110 W.
  EXPECT_NEAR(gpu_thermal_headroom_w(reading(60, 70), 80, 25), 110 - kIdle, 1e-9);
  // The same draw 10 °C hotter (a hot spot: R = 0.643): 85.6 W.
  EXPECT_NEAR(gpu_thermal_headroom_w(reading(70, 70), 80, 25), 55.0 / (45.0 / 70) - kIdle, 1e-9);
  EXPECT_LT(gpu_thermal_headroom_w(reading(70, 70), 80, 25),
            gpu_thermal_headroom_w(reading(60, 70), 80, 25));
  // The same GPU (R = 0.5) with its inlet 10 °C hotter reads 10 °C hotter and has 20 W less.
  EXPECT_NEAR(gpu_thermal_headroom_w(reading(70, 70), 80, 35), 90 - kIdle, 1e-9);
}

TEST(ThermalHeadroom, BoundedByIdleAndTdp) {
  // Past the limit while drawing little (R = 1.625: 33.8 W at the limit, below idle): nothing.
  EXPECT_EQ(gpu_thermal_headroom_w(reading(90, 40), 80, 25), 0);
  // Past the limit at 60 W (R = 1): it could sustain 55 W, 20.25 W above idle.
  EXPECT_NEAR(gpu_thermal_headroom_w(reading(85, 60), 80, 25), 55 - kIdle, 1e-9);
  // Well cooled: the whole TDP.
  EXPECT_EQ(gpu_thermal_headroom_w(reading(30, 200), 80, 25), kTdp - kIdle);
}

TEST(ThermalHeadroom, AReadingThatCannotGiveTheResistanceDoesNotConstrain) {
  EXPECT_EQ(gpu_thermal_headroom_w(reading(-1, 70), 80, 25), kTdp - kIdle);  // no temperature
  EXPECT_EQ(gpu_thermal_headroom_w(reading(60, -1), 80, 25), kTdp - kIdle);  // no draw
  EXPECT_EQ(gpu_thermal_headroom_w(reading(26, 40), 80, 25), kTdp - kIdle);  // 1 °C over inlet
}

TEST(ThermalHeadroom, AHostsHeadroomIsTheSumOverItsGpus) {
  const std::vector<GpuThermalReading> gpus = {reading(60, 70), reading(90, 40), reading(-1, -1)};
  EXPECT_NEAR(thermal_headroom_w(gpus, 80, 25), (110 - kIdle) + 0 + (kTdp - kIdle), 1e-9);
  EXPECT_EQ(thermal_headroom_w({}, 80, 25), 0);
}

}  // namespace
}  // namespace tessera
