#include "control/goodput_reports.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace tessera {

BatchLimits batch_limits(const AdaptiveBatch& a) {
  BatchLimits l;
  l.init_batch = a.batch;
  l.max_batch = a.max_batch;
  l.min_local = a.min_per_gpu;
  l.max_local = a.max_per_gpu;
  // A job whose batch cannot grow trains at that batch on any number of GPUs.
  if (a.max_batch == a.batch) l.fixed_batch = a.batch;
  return l;
}

void take_report(GoodputModel& m, const JobReport& r, const ReportBounds& b) {
  const auto bad = [](const char* field, const std::string& why) {
    throw ServiceError(ServiceError::kInvalid, field, why);
  };
  if (r.step) {
    const StepReport& s = *r.step;
    if (s.replicas < 1 || s.replicas > b.max_gpus) {
      bad("step.gpus", fmt::format("expected 1 to {} (the most GPUs its gang may have), got {}",
                                   b.max_gpus, s.replicas));
    }
    const int nodes = std::min(s.replicas, b.max_nodes);
    if (s.nodes < 1 || s.nodes > nodes) {
      bad("step.nodes", fmt::format("expected 1 to {} (its GPUs, and this cluster's nodes), got {}",
                                    nodes, s.nodes));
    }
    if (s.atomic_bsz < 1 || s.atomic_bsz > b.max_per_gpu) {
      bad("step.per_gpu_batch", fmt::format("expected 1 to {} (its largest per-GPU batch), got {}",
                                            b.max_per_gpu, s.atomic_bsz));
    }
    if (!(s.step_time > 0) || !std::isfinite(s.step_time)) {
      bad("step.seconds", "expected a finite number of seconds above 0");
    }
    if (!(s.sync_time >= 0) || !(s.sync_time <= s.step_time)) {
      bad("step.sync_seconds", "expected 0 to step.seconds");
    }
  }
  if (r.gradient) {
    const GradientStats& g = *r.gradient;
    if (!(g.sqr >= 0) || !std::isfinite(g.sqr))
      bad("gradient.sqr", "expected a finite number >= 0");
    if (!(g.var >= 0) || !std::isfinite(g.var))
      bad("gradient.var", "expected a finite number >= 0");
  }
  if (r.progress) {
    const auto [done, total] = *r.progress;
    if (!(total > 0) || !std::isfinite(total))
      bad("progress.total", "expected a finite number > 0");
    if (!(done >= 0) || !std::isfinite(done)) bad("progress.done", "expected a finite number >= 0");
  }
  if (r.step) m.report(*r.step);
  if (r.gradient) m.report(*r.gradient);
  if (r.progress) m.report_progress(r.progress->first, r.progress->second);
}

std::string resize_message(int from, int to, const std::string& what) {
  if (to > 0) return fmt::format("resized by the goodput round: {} -> {} GPUs", from, to);
  return fmt::format(
      "suspended by the goodput round: its {} GPUs train other {} faster now; it resumes when a "
      "round gives it GPUs",
      from, what);
}

BatchSplit run_split(const GoodputModel& m, int nodes, int gpus) {
  const GoodputChoice c = m.best(nodes, gpus);
  return c.goodput > 0 ? c.split : fixed_split(m.limits(), m.limits().init_batch, gpus);
}

JobReportView report_view(const GoodputModel& m, int gpus, int nodes, int round_gpus) {
  JobReportView v;
  v.gpus = gpus;
  v.nodes = nodes;
  v.round_gpus = round_gpus;
  v.profiled = m.profiled();
  v.batch = run_split(m, nodes, gpus);
  v.global_batch = v.batch.batch(gpus);
  v.speedup = m.speedup(nodes, gpus);
  v.remaining_gpu_seconds = m.remaining_gpu_seconds();
  return v;
}

}  // namespace tessera
