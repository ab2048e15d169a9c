#include "api/prometheus.h"

#include <fmt/format.h>

namespace tessera {
namespace {

// Label values escape backslash, double quote and newline (the format's only escapes).
std::string label(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

}  // namespace

std::string render_prometheus(const ServiceMetrics& m) {
  std::string o;
  o += "# HELP tessera_queue_depth Jobs waiting, per tenant.\n# TYPE tessera_queue_depth gauge\n";
  for (const auto& t : m.tenants) {
    o += fmt::format("tessera_queue_depth{{tenant=\"{}\"}} {}\n", label(t.name), t.pending);
  }
  o += "# HELP tessera_running_jobs Jobs running, per tenant.\n# TYPE tessera_running_jobs gauge\n";
  for (const auto& t : m.tenants) {
    o += fmt::format("tessera_running_jobs{{tenant=\"{}\"}} {}\n", label(t.name), t.running);
  }
  o += "# HELP tessera_gpu_allocated GPUs held, per tenant.\n# TYPE tessera_gpu_allocated gauge\n";
  for (const auto& t : m.tenants) {
    o += fmt::format("tessera_gpu_allocated{{tenant=\"{}\"}} {:g}\n", label(t.name),
                     t.gpus_allocated);
  }
  o += "# HELP tessera_gpus GPUs this server schedules.\n# TYPE tessera_gpus gauge\n";
  o += fmt::format("tessera_gpus {:g}\n", m.gpus_total);
  o += "# HELP tessera_pending_jobs Jobs waiting.\n# TYPE tessera_pending_jobs gauge\n";
  o += fmt::format("tessera_pending_jobs {}\n", m.pending_jobs);
  o += "# HELP tessera_cycle_seconds Time of one scheduling cycle.\n";
  o += "# TYPE tessera_cycle_seconds histogram\n";
  for (size_t b = 0; b < m.cycle_bucket_bounds.size(); ++b) {
    o += fmt::format("tessera_cycle_seconds_bucket{{le=\"{:g}\"}} {}\n", m.cycle_bucket_bounds[b],
                     m.cycle_bucket_counts[b]);
  }
  o += fmt::format("tessera_cycle_seconds_bucket{{le=\"+Inf\"}} {}\n", m.cycles);
  o += fmt::format("tessera_cycle_seconds_sum {:.9f}\n", m.cycle_seconds_sum);
  o += fmt::format("tessera_cycle_seconds_count {}\n", m.cycles);
  o += "# HELP tessera_decisions_total Scheduling decisions applied, by kind "
       "(rate() gives decisions per second).\n# TYPE tessera_decisions_total counter\n";
  o += fmt::format("tessera_decisions_total{{kind=\"start\"}} {}\n", m.starts);
  o += fmt::format("tessera_decisions_total{{kind=\"preempt\"}} {}\n", m.preemptions);
  o += fmt::format("tessera_decisions_total{{kind=\"resize\"}} {}\n", m.resizes);
  o += "# HELP tessera_goodput_rounds_total Goodput rounds run (--policy goodput).\n"
       "# TYPE tessera_goodput_rounds_total counter\n";
  o += fmt::format("tessera_goodput_rounds_total {}\n", m.goodput_rounds);
  if (m.datasets) {
    o += "# HELP tessera_dataset_stagings_total Dataset stagings that ended, by outcome "
         "(serve --dataset-dir).\n# TYPE tessera_dataset_stagings_total counter\n";
    o += fmt::format("tessera_dataset_stagings_total{{outcome=\"ok\"}} {}\n", m.stagings_ok);
    o +=
        fmt::format("tessera_dataset_stagings_total{{outcome=\"failed\"}} {}\n", m.stagings_failed);
    o += "# HELP tessera_dataset_evictions_total Datasets deleted from the cache to make room.\n"
         "# TYPE tessera_dataset_evictions_total counter\n";
    o += fmt::format("tessera_dataset_evictions_total {}\n", m.dataset_evictions);
    o += "# HELP tessera_dataset_cache_bytes What the dataset cache holds (and stages).\n"
         "# TYPE tessera_dataset_cache_bytes gauge\n";
    o += fmt::format("tessera_dataset_cache_bytes {:.0f}\n", m.dataset_cache_used_gb * 1e9);
    if (m.dataset_cache_capacity_gb > 0) {
      o += "# HELP tessera_dataset_cache_capacity_bytes The dataset cache's capacity.\n"
           "# TYPE tessera_dataset_cache_capacity_bytes gauge\n";
      o += fmt::format("tessera_dataset_cache_capacity_bytes {:.0f}\n",
                       m.dataset_cache_capacity_gb * 1e9);
    }
  }
  o += "# HELP tessera_jobs_completed_total Jobs whose processes all ended (succeeded or "
       "failed).\n# TYPE tessera_jobs_completed_total counter\n";
  o += fmt::format("tessera_jobs_completed_total {}\n", m.completions);
  o += "# HELP tessera_store_writable 1 while the database takes writes, 0 while it refuses them "
       "(a full disk): the server is degraded.\n# TYPE tessera_store_writable gauge\n";
  o += fmt::format("tessera_store_writable {}\n", m.store_writable ? 1 : 0);
  o += "# HELP tessera_store_write_failures_total Database writes that failed.\n"
       "# TYPE tessera_store_write_failures_total counter\n";
  o += fmt::format("tessera_store_write_failures_total {}\n", m.store_write_failures);
  o += "# HELP tessera_jobs_in_memory Jobs the server holds (finished ones leave after "
       "--retain-finished)\n# TYPE tessera_jobs_in_memory gauge\n";
  o += fmt::format("tessera_jobs_in_memory {}\n", m.jobs_in_memory);
  o += "# HELP tessera_jobs_evicted_total Finished jobs retention moved out of memory\n"
       "# TYPE tessera_jobs_evicted_total counter\n";
  o += fmt::format("tessera_jobs_evicted_total {}\n", m.jobs_evicted);
  o += "# HELP tessera_audit_suppressed_total Refused calls without a token beyond the audit "
       "log's budget, counted but not recorded one by one.\n"
       "# TYPE tessera_audit_suppressed_total counter\n";
  o += fmt::format("tessera_audit_suppressed_total {}\n", m.audit_suppressed);
  if (m.energy) {
    o += "# HELP tessera_gpu_power_watts A GPU's power draw: measured (nvidia-smi power.draw) or "
         "estimated (idle power when free, else the power model's draw of the share held).\n"
         "# TYPE tessera_gpu_power_watts gauge\n";
    for (const auto& g : m.gpu_power) {
      o += fmt::format("tessera_gpu_power_watts{{node=\"{}\",gpu=\"{}\",source=\"{}\"}} {:g}\n",
                       label(g.node), g.gpu, g.measured ? "measured" : "estimated", g.watts);
    }
    o += "# HELP tessera_energy_joules_total Estimated GPU energy of each tenant's runs.\n"
         "# TYPE tessera_energy_joules_total counter\n";
    for (const auto& [tenant, j] : m.energy_joules) {
      o += fmt::format("tessera_energy_joules_total{{tenant=\"{}\"}} {:.3f}\n", label(tenant), j);
    }
    o += "# HELP tessera_power_watts The cluster's power: GPUs and node base power, times PUE.\n"
         "# TYPE tessera_power_watts gauge\n";
    o += fmt::format("tessera_power_watts {:g}\n", m.power_watts);
    bool temperatures = false;
    for (const auto& g : m.gpu_power) {
      if (g.temperature_c < 0) continue;
      if (!temperatures) {
        o += "# HELP tessera_gpu_temperature_celsius A GPU's core temperature (nvidia-smi "
             "temperature.gpu).\n# TYPE tessera_gpu_temperature_celsius gauge\n";
        temperatures = true;
      }
      o += fmt::format("tessera_gpu_temperature_celsius{{node=\"{}\",gpu=\"{}\"}} {:g}\n",
                       label(g.node), g.gpu, g.temperature_c);
    }
    if (!m.thermal_headroom_w.empty()) {
      o += "# HELP tessera_thermal_headroom_watts The most a node's GPUs may draw above idle "
           "without passing --thermal-limit, from their temperatures and draw.\n"
           "# TYPE tessera_thermal_headroom_watts gauge\n";
      for (const auto& [node, w] : m.thermal_headroom_w) {
        o += fmt::format("tessera_thermal_headroom_watts{{node=\"{}\"}} {:g}\n", label(node), w);
      }
    }
  }
  return o;
}

std::string render_http_front(const HttpFrontStats& s) {
  std::string o;
  o += "# HELP tessera_http_connections Client connections open.\n"
       "# TYPE tessera_http_connections gauge\n";
  o += fmt::format("tessera_http_connections {}\n", s.open_connections);
  o += "# HELP tessera_http_refused_total Connections and requests refused before any handler "
       "ran, by reason.\n# TYPE tessera_http_refused_total counter\n";
  o += fmt::format("tessera_http_refused_total{{reason=\"server_busy\"}} {}\n", s.refused_busy);
  o += fmt::format("tessera_http_refused_total{{reason=\"client_limit\"}} {}\n",
                   s.refused_per_client);
  o += fmt::format("tessera_http_refused_total{{reason=\"malformed_or_too_large\"}} {}\n",
                   s.refused_framing);
  o += fmt::format("tessera_http_refused_total{{reason=\"too_slow\"}} {}\n", s.timed_out);
  o += "# HELP tessera_http_idle_closed_total Keep-alive connections closed after idling.\n"
       "# TYPE tessera_http_idle_closed_total counter\n";
  o += fmt::format("tessera_http_idle_closed_total {}\n", s.idle_closed);
  return o;
}

}  // namespace tessera
