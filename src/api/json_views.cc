#include "api/json_views.h"

#include <cmath>
#include <initializer_list>
#include <limits>
#include <string_view>

#include "model/input_error.h"
#include "model/spelling.h"
#include "store/job_request.h"

namespace tessera {

const nlohmann::json& object_of(const nlohmann::json& v, const std::string& field,
                                std::initializer_list<std::string_view> known) {
  if (!v.is_object()) throw FieldError(field, "expected an object, got " + v.dump());
  for (const auto& kv : v.items()) {
    bool ok = false;
    for (std::string_view k : known) ok = ok || k == kv.key();
    if (!ok) {
      throw FieldError(
          field.empty() ? kv.key() : field + "." + kv.key(),
          "unknown key" + did_you_mean(kv.key(), known) + " (known: " + join_names(known) + ")");
    }
  }
  return v;
}

namespace {

double number_at(const nlohmann::json& obj, const std::string& where, const char* key,
                 bool required) {
  const std::string field = where + "." + key;
  const auto it = obj.find(key);
  if (it == obj.end()) {
    if (required) throw FieldError(field, "required");
    return std::numeric_limits<double>::quiet_NaN();
  }
  if (!it->is_number() || !std::isfinite(it->get<double>())) {
    throw FieldError(field, "expected a finite number, got " + it->dump());
  }
  return it->get<double>();
}

int int_at(const nlohmann::json& obj, const std::string& where, const char* key) {
  const double v = number_at(obj, where, key, true);
  if (v != std::floor(v) || v < 1 || v > 1e9) {
    throw FieldError(where + "." + key, "expected an integer >= 1, got " + obj.at(key).dump());
  }
  return static_cast<int>(v);
}

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
      {"user", r.user.empty() ? nlohmann::json(nullptr) : nlohmann::json(r.user)},
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
  if (v.kube) {
    out["kube"] = {
        {"namespace", v.kube->ns}, {"selector", v.kube->selector}, {"pods", v.kube->names}};
  }
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

nlohmann::json to_json(const ReservationView& v) {
  const auto or_null = [](const std::string& s) {
    return s.empty() ? nlohmann::json(nullptr) : nlohmann::json(s);
  };
  return {{"name", v.name},
          {"tenant", or_null(v.tenant)},
          {"user", or_null(v.user)},
          {"start", v.start},
          {"end", v.end},
          {"state", v.state},
          {"gpus", v.gpus},
          {"missing_gpus", v.missing_gpus},
          {"busy_jobs", v.busy_jobs},
          {"created_by", or_null(v.created_by)},
          {"created_at", v.created_at}};
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
    nlohmann::json gpu{{"index", g.index},
                       {"free_milli", g.free_milli},
                       {"jobs", g.jobs},
                       {"holders", std::move(holders)}};
    if (!g.reservation.empty()) {
      gpu["reservation"] = g.reservation;
      gpu["reservation_active"] = g.reservation_active;
    }
    gpus.push_back(std::move(gpu));
  }
  return {{"name", v.name},
          {"rack", v.rack},
          {"state", v.state},
          {"gpu_type", v.gpu_type},
          {"gpus", gpus},
          {"cpu_milli", v.cpu_milli},
          {"free_cpu_milli", v.free_cpu_milli},
          {"mem_mib", v.mem_mib},
          {"free_mem_mib", v.free_mem_mib}};
}

nlohmann::json to_json(const AuditEntry& e) {
  return {{"id", e.id},     {"at", e.at},         {"actor", e.actor},  {"method", e.method},
          {"path", e.path}, {"status", e.status}, {"target", e.target}};
}

nlohmann::json to_json(const JobEvent& e) {
  return {{"at", e.at}, {"type", e.type}, {"message", e.message}};
}

nlohmann::json to_json(const JobReportView& v) {
  return {{"job", v.job},
          {"gpus", v.gpus},
          {"nodes", v.nodes},
          {"round_gpus", v.round_gpus < 0 ? nlohmann::json(nullptr) : nlohmann::json(v.round_gpus)},
          {"profiled", v.profiled},
          {"batch",
           {{"global", v.global_batch},
            {"per_gpu", v.batch.atomic_bsz},
            {"accumulation_steps", v.batch.accum_steps}}},
          {"speedup", v.speedup},
          {"remaining_gpu_seconds", v.remaining_gpu_seconds < 0
                                        ? nlohmann::json(nullptr)
                                        : nlohmann::json(v.remaining_gpu_seconds)}};
}

JobReport job_report_from_json(const nlohmann::json& j) {
  object_of(j, "", {"step", "gradient", "progress"});
  JobReport r;
  if (const auto it = j.find("step"); it != j.end()) {
    const auto& s =
        object_of(*it, "step", {"gpus", "nodes", "per_gpu_batch", "seconds", "sync_seconds"});
    StepReport step;
    step.replicas = int_at(s, "step", "gpus");
    step.nodes = s.contains("nodes") ? int_at(s, "step", "nodes") : 1;
    step.atomic_bsz = int_at(s, "step", "per_gpu_batch");
    step.step_time = number_at(s, "step", "seconds", true);
    const double sync = number_at(s, "step", "sync_seconds", false);
    step.sync_time = std::isnan(sync) ? 0.0 : sync;
    r.step = step;
  }
  if (const auto it = j.find("gradient"); it != j.end()) {
    const auto& g = object_of(*it, "gradient", {"sqr", "var"});
    r.gradient =
        GradientStats{number_at(g, "gradient", "sqr", true), number_at(g, "gradient", "var", true)};
  }
  if (const auto it = j.find("progress"); it != j.end()) {
    const auto& p = object_of(*it, "progress", {"done", "total"});
    r.progress = std::make_pair(number_at(p, "progress", "done", true),
                                number_at(p, "progress", "total", true));
  }
  if (!r.step && !r.gradient && !r.progress) {
    throw FieldError("", "expected at least one of step, gradient, progress");
  }
  return r;
}

}  // namespace tessera
