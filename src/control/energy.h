// Energy in `tessera serve`: what each GPU draws, what each run draws, and each
// tenant's energy counter, from the power model (insight/power_model.h).
//
// Estimates: a GPU held by jobs draws its type's median curve at the holder's power limit (the
// power model's curve(type, "").power(limit): jobs in serve name no workload; the limit is the
// TDP unless a power policy set one, serve --power-cap / --energy-weight) times the share held,
// never less than its idle power and never more than its TDP; a GPU nothing holds draws its
// idle power. A GPU type the model has no figures for (unknown_power_spec(), e.g. "virtual")
// draws 0: nothing is invented for it. A run's draw (RunRecord::gpu_watts) is the sum over the
// GPUs it holds of share x that estimate at its limit; a run whose limit changes draws each
// estimate for its part of the run (RunRecord::gpu_watts is then the run's average).
//
// Counters: a tenant's energy (tessera_energy_joules_total) is derived from the run records,
// not kept separately: the runs in the database (job_runs.gpu_watts x length, read once at
// startup), plus the runs that ended since, plus the runs going now up to the service's clock.
// So a restart loses nothing the database holds (a running job's run counts from its start,
// the time the server was down included, exactly as its GPU-hours do) and usage's energy_kwh
// and the counter agree. The counter never goes down: a run whose end is learnt later than a
// scrape (its exit time is before that scrape) does not take back what was shown.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "insight/power_model.h"

namespace tessera {

// Whether the model has power figures for a GPU type (false for types it does not know).
bool has_power_figures(const PowerModel& model, std::string_view type);
// The estimated draw (W) of one whole GPU of `type` running a job at power limit `limit_w`
// (0: the TDP); 0 without figures.
double estimated_gpu_watts(const PowerModel& model, std::string_view type, double limit_w = 0);
// A run's estimated draw (W): per GPU type held (milli-GPUs), its share x estimated_gpu_watts
// at `limit_w`.
double run_gpu_watts(const PowerModel& model, const std::map<std::string, int64_t>& gpu_milli,
                     double limit_w = 0);
// One GPU's estimated draw (W) with `held_milli` of it held: idle when 0, else the estimate x
// the share, within [idle, TDP]; 0 without figures.
double estimated_gpu_draw(const PowerModel& model, std::string_view type, int32_t held_milli);
// The same for a GPU whose holders run at their own limits: (milli held, limit W; 0: TDP).
double estimated_gpu_draw(const PowerModel& model, std::string_view type,
                          const std::vector<std::pair<int32_t, double>>& held);

// Per-tenant energy counters (J), as described above.
class EnergyCounters {
 public:
  // The runs in the database (Store::run_energy_joules), at startup.
  void restore(std::map<std::string, double> joules) { ended_ = std::move(joules); }
  // A run that ended (its gpu_watts x its length).
  void add_ended(const std::string& tenant, double joules) { ended_[tenant] += joules; }
  // The counters with `live` (the energy of the runs going now, by tenant) added, each at
  // least what the last read returned.
  const std::map<std::string, double>& read(const std::map<std::string, double>& live);

 private:
  std::map<std::string, double> ended_;
  std::map<std::string, double> shown_;
};

}  // namespace tessera
