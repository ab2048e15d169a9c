// A usage row (model/accounting.h) as JSON, one schema wherever it is written or read: the
// service's GET /v1/usage, a simulation's result file ("usage"), and `tessera usage`, which
// prints either.
#pragma once

#include <nlohmann/json.hpp>

#include "model/accounting.h"

namespace tessera {

// Json: nlohmann::json or nlohmann::ordered_json (a result file keeps its keys in order).
template <class Json>
Json usage_row_json(const UsageRow& r) {
  Json j;
  j["tenant"] = r.tenant;
  j["queue"] = r.queue;
  if (!r.user.empty()) j["user"] = r.user;  // rows by user only
  j["gpu_hours"] = r.gpu_hours;
  j["cpu_hours"] = r.cpu_hours;
  j["jobs"] = r.jobs;
  j["started"] = r.started;
  j["mean_wait_hours"] = r.mean_wait_hours();
  j["preempted"] = r.preempted;
  j["preemptor"] = r.preemptor;
  // Absent where unknown (a row without an energy estimate; no carbon series).
  if (r.energy_kwh >= 0) j["energy_kwh"] = r.energy_kwh;
  if (r.carbon_kg >= 0) j["carbon_kg"] = r.carbon_kg;
  return j;
}

// The inverse (mean_wait_hours back into wait_hours_sum); missing fields are zero, but a
// missing energy_kwh or carbon_kg is unknown (-1).
UsageRow usage_row_from_json(const nlohmann::json& row);

}  // namespace tessera
