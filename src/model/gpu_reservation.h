// GPUs set aside for a tenant, or one of its users, over a time window (as Slurm's
// reservations). Inside the window only the reservation's own jobs may use them; before it
// begins, also any job whose time limit makes it end by then (so backfill never runs into the
// window); after it ends they are everyone's again.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/ids.h"
#include "model/job.h"

namespace tessera {

struct GpuReservation {
  std::string name;
  TenantId tenant = 0;
  uint32_t user = kNoId;      // JobSpec::user; kNoId: every job of the tenant
  double start = 0, end = 0;  // the window, on the scheduler's clock: [start, end)
  std::vector<GpuId> gpus;    // sorted, distinct

  bool owns(const JobSpec& job) const {
    return job.tenant == tenant && (user == kNoId || job.user == user);
  }
  // Whether `job`, starting at `now`, may run on these GPUs: they are free for it (its own, the
  // window over, or it ends before the window begins).
  bool open_to(const JobSpec& job, double now) const {
    if (now >= end || owns(job)) return true;
    return now < start && job.time_limit >= 0 && now + job.time_limit <= start;
  }
};

}  // namespace tessera
