// Reads Zeus's power traces (NSDI'23; ../shared/data/energy/zeus/summary_power_<gpu>.csv:
// dataset, network, batch_size, optimizer, power_limit, time_per_epoch, average_power) into the
// power model's curves: per GPU and workload, at each power limit, the median over the measured
// configurations (batch size x optimizer) of the speed relative to the same configuration at
// the highest limit, and of the average draw; the "" curve of a GPU is the median over its
// workloads. docs/energy.md describes the data and the choices.
#pragma once

#include <map>
#include <string>
#include <string_view>

#include "insight/power_model.h"

namespace tessera {

// One file's curves (workload -> curve, plus ""). `origin` names the file in errors: a bad
// line throws InputError naming the line and field.
PowerModel::TypeCurves parse_zeus_power_csv(std::string_view text, const std::string& origin);

// Every summary_power_<gpu>.csv in `dir` (v100, a40, p100, rtx6000 -> V100, A40, P100,
// RTX6000). A missing file is skipped (that GPU's curves are then derived); none at all gives
// an empty map.
std::map<std::string, PowerModel::TypeCurves> load_zeus_curves(const std::string& dir);

// The model from `data_dir`/energy/zeus (data_dir is ../shared/data or --data-dir).
PowerModel load_power_model(const std::string& data_dir);

}  // namespace tessera
