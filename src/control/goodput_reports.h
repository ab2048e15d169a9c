// What `tessera serve` and `tessera kube` share of goodput-adaptive jobs (docs/goodput.md): the
// model a job's batch limits make, a report checked and taken in, the batch split a run is told,
// and the report's answer.
#pragma once

#include <string>

#include "control/read_model.h"
#include "engine/goodput_model.h"
#include "store/job_request.h"

namespace tessera {

// The engine's batch limits for a job's `adaptive` section (a batch that cannot grow is fixed).
BatchLimits batch_limits(const AdaptiveBatch& a);

// What a report may claim of a job: at most `max_gpus` GPUs (its largest gang) over at most
// `max_nodes` nodes, micro-batches of at most `max_per_gpu`.
struct ReportBounds {
  int max_gpus = 1;
  int max_nodes = 1;
  int max_per_gpu = 1;
};

// Refuses a report that cannot be true with ServiceError kInvalid naming the field (checked
// whole, so that a refused report records nothing); else records it in `m`.
void take_report(GoodputModel& m, const JobReport& r, const ReportBounds& b);

// The split a run on `gpus` GPUs over `nodes` nodes trains with: the model's best there, or,
// before the job has said how fast it is, the batch it was tuned for split over its GPUs.
BatchSplit run_split(const GoodputModel& m, int nodes, int gpus);

// Why a round stops a running job (or pod group, `what`) of `from` GPUs: resized to `to`, or
// suspended (to 0). The job's message (serve) or its pods' eviction event (kube).
std::string resize_message(int from, int to, const std::string& what);

// The report's answer for a job running on `gpus` GPUs over `nodes` nodes, which the last round
// gave `round_gpus` (-1: none yet).
JobReportView report_view(const GoodputModel& m, int gpus, int nodes, int round_gpus);

}  // namespace tessera
