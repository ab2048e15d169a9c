#include "model/accounting.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <tuple>

namespace tessera {

double UsageRow::total_gpu_hours() const {
  double h = 0;
  for (const auto& [type, hours] : gpu_hours) h += hours;
  return h;
}

std::vector<UsageRow> usage_report(const std::vector<RunRecord>& runs,
                                   const std::vector<JobRecord>& jobs, double since, double until,
                                   const CarbonIntensity* carbon, bool by_user) {
  std::map<std::tuple<std::string, std::string, std::string>, UsageRow> rows;
  auto row = [&](const std::string& tenant, const std::string& queue,
                 const std::string& user) -> UsageRow& {
    const std::string& who = by_user ? user : std::string();
    const auto [it, fresh] = rows.try_emplace({tenant, queue, who});
    UsageRow& r = it->second;
    if (fresh) {
      r.tenant = tenant;
      r.queue = queue;
      r.user = who;
      r.energy_kwh = 0;  // known (the runs' estimates), though perhaps 0
      r.carbon_kg = carbon != nullptr ? 0 : -1;
    }
    return r;
  };
  auto inside = [&](double t) { return t >= since && t < until; };
  std::map<int64_t, double> first_start;  // by job
  for (const RunRecord& run : runs) {
    const auto [it, fresh] = first_start.try_emplace(run.job, run.started);
    if (!fresh) it->second = std::min(it->second, run.started);
    const double hours =
        std::max(0.0, std::min(run.ended, until) - std::max(run.started, since)) / 3600.0;
    const bool preempted = run.outcome == "preempted" && inside(run.ended);
    if (hours <= 0 && !preempted) continue;
    UsageRow& r = row(run.tenant, run.queue, run.user);
    if (hours > 0 && run.gpu_watts > 0) {
      r.energy_kwh += run.gpu_watts * hours / 1000.0;
      if (carbon != nullptr) {
        r.carbon_kg +=
            carbon->grams(run.gpu_watts, std::max(run.started, since), std::min(run.ended, until)) /
            1000.0;
      }
    }
    for (const auto& [type, milli] : run.gpu_milli) {
      r.gpu_hours[type] += hours * static_cast<double>(milli) / 1000.0;
    }
    r.cpu_hours += hours * static_cast<double>(run.cpu_milli) / 1000.0;
    if (preempted) ++r.preempted;
  }
  // Preemptions caused: counted for the preemptor's tenant, in the queue of its job.
  std::map<int64_t, const JobRecord*> by_id;
  for (const JobRecord& j : jobs) by_id[j.id] = &j;
  for (const RunRecord& run : runs) {
    if (run.outcome != "preempted" || run.preempted_by < 0 || !inside(run.ended)) continue;
    const auto it = by_id.find(run.preempted_by);
    const std::string queue = it != by_id.end() ? it->second->queue : "";
    const std::string tenant = it != by_id.end() ? it->second->tenant : run.preempted_by_tenant;
    const std::string user = it != by_id.end() ? it->second->user : "";
    ++row(tenant, queue, user).preemptor;
  }
  for (const JobRecord& j : jobs) {
    if (j.finished >= 0 && inside(j.finished)) ++row(j.tenant, j.queue, j.user).jobs[j.state];
    const auto fs = first_start.find(j.id);
    if (fs != first_start.end() && inside(fs->second)) {
      UsageRow& r = row(j.tenant, j.queue, j.user);
      ++r.started;
      r.wait_hours_sum += std::max(0.0, fs->second - j.submitted) / 3600.0;
    }
  }
  std::vector<UsageRow> out;
  out.reserve(rows.size());
  for (auto& [key, r] : rows) out.push_back(std::move(r));
  return out;
}

PriceTable load_prices(const std::string& path) {
  YAML::Node root;
  try {
    root = YAML::LoadFile(path);
  } catch (const YAML::Exception& e) {
    throw std::invalid_argument(path + ": " + e.what());
  }
  if (!root.IsMap()) {
    throw std::invalid_argument(path +
                                ": expected a map of GPU type to price per GPU-hour, e.g. "
                                "\"V100: 2.48\" (and optionally cpu_hour, kwh)");
  }
  PriceTable t;
  for (const auto& kv : root) {
    const std::string key = kv.first.as<std::string>();
    double v = 0;
    try {
      v = kv.second.as<double>();
    } catch (const YAML::Exception&) {
      throw std::invalid_argument(path + ": " + key + ": expected a number (price per hour)");
    }
    if (!std::isfinite(v) || v < 0) {
      throw std::invalid_argument(path + ": " + key + ": a price must be 0 or more");
    }
    if (key == "cpu_hour") {
      t.cpu_hour = v;
    } else if (key == "kwh") {
      t.kwh = v;
    } else {
      t.gpu_hour[key] = v;
    }
  }
  return t;
}

double cost_of(const UsageRow& row, const PriceTable& prices, std::vector<std::string>& unpriced) {
  double cost = row.cpu_hours * prices.cpu_hour;
  if (row.energy_kwh > 0) cost += row.energy_kwh * prices.kwh;
  for (const auto& [type, hours] : row.gpu_hours) {
    const auto it = prices.gpu_hour.find(type);
    if (it != prices.gpu_hour.end()) {
      cost += hours * it->second;
    } else if (hours > 0 && std::find(unpriced.begin(), unpriced.end(), type) == unpriced.end()) {
      unpriced.push_back(type);
    }
  }
  return cost;
}

}  // namespace tessera
