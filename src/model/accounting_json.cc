#include "model/accounting_json.h"

namespace tessera {

UsageRow usage_row_from_json(const nlohmann::json& row) {
  UsageRow r;
  r.tenant = row.value("tenant", "");
  r.queue = row.value("queue", "");
  if (row.contains("user") && row["user"].is_string()) r.user = row["user"].get<std::string>();
  const nlohmann::json gpu_hours = row.value("gpu_hours", nlohmann::json::object());
  for (const auto& g : gpu_hours.items()) r.gpu_hours[g.key()] = g.value().get<double>();
  r.cpu_hours = row.value("cpu_hours", 0.0);
  const nlohmann::json jobs = row.value("jobs", nlohmann::json::object());
  for (const auto& g : jobs.items()) r.jobs[g.key()] = g.value().get<int64_t>();
  r.started = row.value("started", int64_t{0});
  r.wait_hours_sum = row.value("mean_wait_hours", 0.0) * static_cast<double>(r.started);
  r.preempted = row.value("preempted", int64_t{0});
  r.preemptor = row.value("preemptor", int64_t{0});
  auto known = [&](const char* key) {
    return row.contains(key) && row[key].is_number() ? row[key].get<double>() : -1.0;
  };
  r.energy_kwh = known("energy_kwh");
  r.carbon_kg = known("carbon_kg");
  return r;
}

}  // namespace tessera
