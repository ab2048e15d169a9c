#include "engine/decisions.h"

#include <fmt/format.h>

namespace tessera {

// PendingCode -> the short reason code of job tables.
const char* reason_code(PendingCode c) {
  switch (c) {
    case PendingCode::kInsufficientGpus:
      return "Resources";
    case PendingCode::kGangCannotFit:
      return "GangFit";
    case PendingCode::kWaitingForReservation:
      return "Reservation";
    case PendingCode::kBlockedByHead:
      return "HeadOfLine";
    case PendingCode::kQuotaExceeded:
      return "Quota";
    case PendingCode::kOverFairShare:
      return "FairShare";
    case PendingCode::kReservedForInference:
      return "InferenceReserve";
    case PendingCode::kPowerCapped:
      return "PowerCap";
    case PendingCode::kCarbonDeferred:
      return "CarbonDefer";
    case PendingCode::kDataLocality:
      return "DataLocality";
    case PendingCode::kSiteUnreachable:
      return "SiteUnreachable";
    case PendingCode::kReservedGpus:
      return "ReservedGpus";
  }
  return "Resources";
}

const char* to_string(PreemptionCause c) {
  switch (c) {
    case PreemptionCause::kPriority:
      return "priority";
    case PreemptionCause::kReclaim:
      return "reclaim";
    case PreemptionCause::kTypeReclaim:
      return "type_reclaim";
    case PreemptionCause::kRound:
      return "round";
  }
  return "?";
}

const char* to_string(PendingCode c) {
  switch (c) {
    case PendingCode::kInsufficientGpus:
      return "insufficient-gpus";
    case PendingCode::kGangCannotFit:
      return "gang-cannot-fit";
    case PendingCode::kWaitingForReservation:
      return "waiting-for-reservation";
    case PendingCode::kBlockedByHead:
      return "blocked-by-head";
    case PendingCode::kQuotaExceeded:
      return "quota-exceeded";
    case PendingCode::kOverFairShare:
      return "over-fair-share";
    case PendingCode::kReservedForInference:
      return "reserved-for-inference";
    case PendingCode::kPowerCapped:
      return "power-capped";
    case PendingCode::kCarbonDeferred:
      return "carbon-deferred";
    case PendingCode::kDataLocality:
      return "data-locality";
    case PendingCode::kSiteUnreachable:
      return "site-unreachable";
    case PendingCode::kReservedGpus:
      return "reserved-gpus";
  }
  return "unknown";
}

namespace {

std::string describe_code(const PendingReason& r, const std::string& blocker_name,
                          const std::string& queue_path) {
  const double need = static_cast<double>(r.need_gpu_milli) / 1000.0;
  const double free = static_cast<double>(r.free_gpu_milli) / 1000.0;
  switch (r.code) {
    case PendingCode::kInsufficientGpus:
      return fmt::format("insufficient GPUs of an allowed type: needs {:g}, {:g} free", need, free);
    case PendingCode::kGangCannotFit:
      if (r.eligible_free_gpu_milli >= 0) {
        const double eligible = static_cast<double>(r.eligible_free_gpu_milli) / 1000.0;
        if (r.eligible_free_gpu_milli < r.need_gpu_milli) {
          return fmt::format(
              "gang cannot fit on its eligible nodes: {:g} GPUs free, but only {:g} of them on "
              "the nodes it may use (its node restriction); needs {:g}",
              free, eligible, need);
        }
        return fmt::format(
            "gang cannot fit: {:g} GPUs free on the nodes it may use (its node restriction), "
            "but no set of them hosts every member ({:g} GPUs)",
            eligible, need);
      }
      return fmt::format(
          "gang cannot fit: {:g} GPUs free, but no set of nodes hosts every member ({:g} GPUs)",
          free, need);
    case PendingCode::kWaitingForReservation:
      return fmt::format("waiting for reservation: starting now would delay job {}", blocker_name);
    case PendingCode::kBlockedByHead:
      return fmt::format("blocked behind head-of-line job {} (no backfill)", blocker_name);
    case PendingCode::kQuotaExceeded:
      return fmt::format(
          "quota: queue {} holds {:g} GPUs of its limit {:g} (guarantee + borrowing limit); "
          "this job needs {:g}",
          queue_path, static_cast<double>(r.queue_holds_milli) / 1000.0,
          static_cast<double>(r.queue_bound_milli) / 1000.0, need);
    case PendingCode::kOverFairShare:
      if (r.borrow_max_runtime > 0) {
        return fmt::format(
            "fair share: queue {} holds {:g} GPUs and this job would take it past its fair "
            "share of {:g}; past its share a queue starts only jobs expected to end within {:g} "
            "s (preemption.borrow_max_runtime), so that what it borrows comes back without a "
            "reclaim",
            queue_path, static_cast<double>(r.queue_holds_milli) / 1000.0,
            static_cast<double>(r.queue_bound_milli) / 1000.0, r.borrow_max_runtime);
      }
      return fmt::format(
          "fair share: {:g} GPUs free, needs {:g}; queue {} holds {:g} GPUs and this job would "
          "take it past its fair share of {:g}, so it may not reclaim GPUs from other queues",
          free, need, queue_path, static_cast<double>(r.queue_holds_milli) / 1000.0,
          static_cast<double>(r.queue_bound_milli) / 1000.0);
    case PendingCode::kReservedForInference:
      return fmt::format(
          "reserved for inference: {:g} GPUs free, {:g} of them held back for the "
          "inference-critical arrivals forecast; this job needs {:g}",
          free, static_cast<double>(r.queue_bound_milli) / 1000.0, need);
    case PendingCode::kPowerCapped:
      if (r.node != kNoId) {
        return fmt::format(
            "thermal headroom: no node it may use has room for its draw; node #{} may draw "
            "{:.0f} W above idle and would draw {:.0f} W",
            r.node, r.power_cap_w, r.power_need_w);
      }
      return fmt::format(
          "power cap: starting it would take the estimated draw of {} to {:.1f} kW, past its "
          "cap of {:.1f} kW{}",
          r.rack == kNoId ? std::string("the cluster") : fmt::format("rack #{}", r.rack),
          r.power_need_w / 1000.0, r.power_cap_w / 1000.0,
          r.shifted ? " even at the lowest power limits allowed" : "");
    case PendingCode::kCarbonDeferred:
      return fmt::format(
          "carbon: waiting for cleaner electricity: {:.0f} g/kWh if it starts now, {:.0f} g/kWh "
          "from t={:.0f} s; its queue lets it wait until t={:.0f} s",
          r.carbon_now, r.carbon_then, r.carbon_at, r.carbon_until);
    case PendingCode::kDataLocality:
      return fmt::format(
          "data locality: waits for room on the nodes that hold its dataset ({:g} GPUs free "
          "elsewhere) rather than stage its data to others",
          free);
    case PendingCode::kSiteUnreachable:
      return fmt::format(
          "site unreachable: waits at its region's edge site ({:g} GPUs free there); the main "
          "site is cut off or too slow for its latency SLO",
          free);
    case PendingCode::kReservedGpus:
      return fmt::format(
          "reserved GPUs: needs {:g}, {:g} free; {:g} more are reserved for someone else{} over "
          "a window it would run into (before a window begins, a job whose time limit and stop "
          "grace end by then may use its GPUs)",
          need, free, static_cast<double>(r.reserved_gpu_milli) / 1000.0,
          blocker_name.empty() ? std::string() : " (reservation " + blocker_name + ")");
  }
  return "pending";
}

// GPU-seconds as GPU-hours, or GPU-minutes under one GPU-hour.
std::string gpu_time(double gpu_seconds) {
  return gpu_seconds >= 3600 ? fmt::format("{:.1f} GPU-hours", gpu_seconds / 3600)
                             : fmt::format("{:.0f} GPU-minutes", gpu_seconds / 60);
}

}  // namespace

std::string describe(const PendingReason& r, const std::string& blocker_name,
                     const std::string& queue_path) {
  std::string out = describe_code(r, blocker_name, queue_path);
  if (r.reclaim_price_gpu_seconds > 0) {
    out += fmt::format(
        "; not reclaiming: stopping the jobs that would make room wastes {} (checkpoint, restart, "
        "lost work), more than the {} its queue goes without until running jobs are expected to "
        "free its GPUs (preemption.reclaim_cost_ratio)",
        gpu_time(r.reclaim_price_gpu_seconds), gpu_time(r.reclaim_deficit_gpu_seconds));
  }
  return out;
}

std::string describe_price(const Preemption& p) {
  if (p.cause != PreemptionCause::kReclaim || p.price_gpu_seconds <= 0) return "";
  if (p.deficit_gpu_seconds < 0) {
    return fmt::format(
        "reclaim costs {} of its checkpoint, restart and lost work; no running job "
        "was expected to free the GPUs",
        gpu_time(p.price_gpu_seconds));
  }
  return fmt::format(
      "reclaim costs {} of its checkpoint, restart and lost work; the preempting queue would "
      "otherwise have gone without {} waiting for running jobs to end",
      gpu_time(p.price_gpu_seconds), gpu_time(p.deficit_gpu_seconds));
}

}  // namespace tessera
