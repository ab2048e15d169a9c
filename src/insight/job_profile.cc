#include "insight/job_profile.h"

#include <algorithm>

namespace tessera {

namespace {
double clamp_pct(double v) {
  return std::clamp(v, 0.0, 100.0);
}
}  // namespace

void Profiler::add(const ProfileSample& s) {
  if (s.t >= window_) complete_ = true;
  if (s.t > window_) return;
  peak_.gpu_util = std::max(peak_.gpu_util, clamp_pct(s.gpu_util));
  peak_.mem_alloc = std::max(peak_.mem_alloc, clamp_pct(s.mem_alloc));
  peak_.mem_time = std::max(peak_.mem_time, clamp_pct(s.mem_time));
  ++samples_;
}

}  // namespace tessera
