// The power and energy model (docs/energy.md): what a GPU draws idle and at full
// power, and, per workload, how fast it runs and how much it draws under each GPU power limit.
//
// Curves come from measurements (Zeus, NSDI'23: time per epoch and average power of six
// training workloads at every power limit on V100, A40, P100 and RTX6000; insight/zeus_curves).
// A workload the data does not know uses the median curve of its GPU type; a GPU type the data
// does not know uses the median of the measured types' curves with the power limit taken as a
// fraction of each type's TDP, scaled to its own TDP (docs/energy.md says why and how far to
// trust it). Every figure of GpuPowerSpec names its source.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "model/gpu_type.h"

namespace tessera {

// One power limit of a curve: the speed there relative to the speed at the highest limit (<= 1)
// and the GPU's average draw (W, whole board, while the workload runs).
struct PowerPoint {
  double limit_w = 0;
  double speed = 1;
  double power_w = 0;
};

// Speed and power against the power limit. Invariant: points sorted by limit, speed and power
// non-decreasing in the limit, speed 1 at the highest limit, at least one point.
class PowerCurve {
 public:
  PowerCurve() = default;
  // Sorts the points, makes speed and power monotone (pool-adjacent violators: measurement
  // noise must not make a lower limit look faster) and scales speed to 1 at the highest limit.
  // Throws std::invalid_argument for no points or a non-positive limit or speed.
  explicit PowerCurve(std::vector<PowerPoint> points);

  // Linear between points; clamped to the ends.
  double speed(double limit_w) const;
  double power(double limit_w) const;
  double min_limit() const { return points_.front().limit_w; }
  double max_limit() const { return points_.back().limit_w; }
  const std::vector<PowerPoint>& points() const { return points_; }

 private:
  std::vector<PowerPoint> points_{PowerPoint{1, 1, 1}};
};

// What a GPU type draws: TDP (its default and highest power limit), the lowest limit the driver
// accepts, and idle power (board draw with nothing running). Each with where it came from.
struct GpuPowerSpec {
  std::string type;
  double tdp_w = 0;
  double min_limit_w = 0;
  double idle_w = 0;
  std::string source;     // where tdp and min limit came from
  std::string idle_from;  // where idle came from
  // The Zeus GPU whose measured curves this type uses (itself, or V100 for V100 variants); ""
  // when its curves are derived.
  std::string measured_as;
  bool curves_measured() const { return !measured_as.empty(); }
};

// The built-in specs (docs/energy.md lists them with sources), by type name as GpuTypeTable
// spells it, and the one a type not listed gets (its source says it is assumed, so that reports
// can flag it).
const std::vector<GpuPowerSpec>& builtin_power_specs();
const GpuPowerSpec& unknown_power_spec();

// Zeus's energy knob (NSDI'23, eq. 2): the limit among the curve's points that minimises
// eta * energy + (1 - eta) * max_power * time per unit of work, where energy = power / speed and
// time = 1 / speed. eta 0 is the fastest limit, eta 1 the least energy. eta outside [0, 1]
// throws std::invalid_argument.
double energy_optimal_limit(const PowerCurve& curve, double eta, double max_power_w);

class PowerModel {
 public:
  // Curves keyed by workload name for each measured type (zeus_curves.h builds them); the
  // "" entry of a type is its median curve. Empty: no measurements, every type gets a flat
  // curve (speed 1, power TDP at every limit), and measured() is false.
  using TypeCurves = std::map<std::string, PowerCurve>;
  explicit PowerModel(std::map<std::string, TypeCurves> measured = {});

  bool measured() const { return measured_; }
  // The spec of a type by name (case-insensitive; aliases as GpuTypeTable resolves them).
  const GpuPowerSpec& spec(std::string_view type) const;
  // The Zeus workload a job's model name stands for ("" when none: the median curve applies):
  // resnet50/imagenet, shufflenetv2/cifar, deepspeech2, ncf/recommendation, bert.
  static std::string workload_of(std::string_view model);
  // The curve of `workload` (a key workload_of gives, or "") on GPU type `type`.
  const PowerCurve& curve(std::string_view type, std::string_view workload) const;
  // The workloads measured on some type, sorted.
  std::vector<std::string> workloads() const;

 private:
  const TypeCurves& curves_of(const GpuPowerSpec& spec) const;
  // Measured types' curves by spec type name; every other built-in type's (and the unknown
  // spec's) derived ones, all built at construction so that a const model is safe to share.
  std::map<std::string, TypeCurves> curves_;
  bool measured_ = false;
};

// A PowerModel bound to a cluster's GPU type table and a workload's model names, for the hot
// paths (engine, simulator): curves by (type id, model id) without string work, and the draw of
// an allocation at a limit.
class BoundPowerModel {
 public:
  BoundPowerModel(const PowerModel& model, const GpuTypeTable& types,
                  const std::vector<std::string>& model_names);
  const GpuPowerSpec& spec(GpuTypeId t) const { return *specs_.at(t); }
  // model: an index into model_names, or kNoId (or out of range) for a job with no model.
  const PowerCurve& curve(GpuTypeId t, uint32_t model) const;

 private:
  std::vector<const GpuPowerSpec*> specs_;  // by GpuTypeId
  std::vector<uint32_t> workload_;          // by model id: a column of table_ (0 = median)
  // [type][workload column]: the model owns the curves.
  std::vector<std::vector<const PowerCurve*>> table_;
};

}  // namespace tessera
