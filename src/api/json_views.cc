#include "api/json_views.h"

namespace tessera {
namespace {

nlohmann::json optional_time(double t) {
  return t < 0 ? nlohmann::json(nullptr) : nlohmann::json(t);
}

}  // namespace

nlohmann::json to_json(const JobView& v) {
  const JobRow& r = v.row;
  nlohmann::json placement = nlohmann::json::array();
  for (const MemberPlacement& p : v.placement) {
    placement.push_back(
        {{"rank", p.rank}, {"node", p.node}, {"gpus", p.gpus}, {"gpu_milli", p.gpu_milli}});
  }
  nlohmann::json out = {
      {"id", r.id},
      {"name", r.spec.name},
      {"tenant", r.tenant},
      {"state", to_string(r.state)},
      {"spec", to_json(r.spec)},
      {"submitted_at", r.submitted_at},
      {"started_at", optional_time(r.started_at)},
      {"finished_at", optional_time(r.finished_at)},
      {"attempts", r.attempts},
      {"preemptions", r.preemptions},
      {"exit_code", r.exit_code ? nlohmann::json(*r.exit_code) : nlohmann::json(nullptr)},
      {"message", r.message},
      {"pending_reason",
       v.pending_reason.empty() ? nlohmann::json(nullptr) : nlohmann::json(v.pending_reason)},
      {"reason", v.reason_code.empty() ? nlohmann::json(nullptr) : nlohmann::json(v.reason_code)},
      {"queue", v.queue},
      {"priority_class", v.priority_class},
      {"allocation", placement}};
  if (r.array_id != 0) {
    out["array_id"] = r.array_id;
    out["array_index"] = r.array_index;
  }
  // serve --classify chose its class from this predicted kind (the user named none).
  out["classified_as"] =
      r.classified.empty() ? nlohmann::json(nullptr) : nlohmann::json(r.classified);
  // The GPU power limit its run has (serve's power policies); null: its GPUs' default (TDP).
  out["power_limit_w"] =
      r.power_limit_w > 0 ? nlohmann::json(r.power_limit_w) : nlohmann::json(nullptr);
  return out;
}

nlohmann::json to_json(const QueueView& v) {
  return {{"path", v.path},
          {"weight", v.weight},
          {"guarantee_gpus", v.guarantee_gpus},
          {"limit_gpus", v.limit_gpus < 0 ? nlohmann::json(nullptr) : nlohmann::json(v.limit_gpus)},
          {"holds_gpus", v.holds_gpus},
          {"fair_share_gpus", v.fair_share_gpus},
          {"decayed_gpus", v.decayed_gpus},
          {"pending_jobs", v.pending_jobs},
          {"running_jobs", v.running_jobs}};
}

nlohmann::json to_json(const NodeView& v) {
  nlohmann::json gpus = nlohmann::json::array();
  for (const GpuView& g : v.gpus) {
    nlohmann::json holders = nlohmann::json::array();
    for (const GpuHolder& h : g.holders) {
      holders.push_back(
          {{"job", h.job},
           {"tenant", h.tenant.empty() ? nlohmann::json(nullptr) : nlohmann::json(h.tenant)},
           {"name", h.name.empty() ? nlohmann::json(nullptr) : nlohmann::json(h.name)},
           {"gpu_milli", h.milli}});
    }
    gpus.push_back({{"index", g.index},
                    {"free_milli", g.free_milli},
                    {"jobs", g.jobs},
                    {"holders", std::move(holders)}});
  }
  return {{"name", v.name},           {"state", v.state},
          {"gpu_type", v.gpu_type},   {"gpus", gpus},
          {"cpu_milli", v.cpu_milli}, {"free_cpu_milli", v.free_cpu_milli},
          {"mem_mib", v.mem_mib},     {"free_mem_mib", v.free_mem_mib}};
}

nlohmann::json to_json(const AuditEntry& e) {
  return {{"id", e.id},     {"at", e.at},         {"actor", e.actor},  {"method", e.method},
          {"path", e.path}, {"status", e.status}, {"target", e.target}};
}

nlohmann::json to_json(const JobEvent& e) {
  return {{"at", e.at}, {"type", e.type}, {"message", e.message}};
}

}  // namespace tessera
