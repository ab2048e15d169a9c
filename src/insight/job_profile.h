// Black-box features of a training job, as the job recommendation service sees it (Ray et al.,
// "Job Recommendation Service for GPU Sharing in Kubernetes", IEEE Cloud Summit 2023): peaks of
// GPU utilisation, GPU memory allocated and GPU time spent accessing memory over the job's first
// minutes. Never the model, dataset, batch size or epochs: a scheduler cannot rely on those.
#pragma once

#include <array>

namespace tessera {

// Peaks in percent, each in [0, 100].
struct JobFeatures {
  double gpu_util = 0;   // MGUP: max GPU utilisation %
  double mem_alloc = 0;  // MGMAP: max GPU memory allocated %
  double mem_time = 0;   // MGTSAMP: max GPU time spent accessing memory %
};

using FeatureVec = std::array<double, 3>;
inline FeatureVec to_vec(const JobFeatures& f) {
  return {f.gpu_util, f.mem_alloc, f.mem_time};
}
inline JobFeatures from_vec(const FeatureVec& v) {
  return {v[0], v[1], v[2]};
}

// One reading of a job's GPU counters (e.g. nvidia-smi / DCGM every few seconds).
struct ProfileSample {
  double t = 0;                                      // seconds since the job started
  double gpu_util = 0, mem_alloc = 0, mem_time = 0;  // percent
};

// Keeps the peaks of the samples taken in the first `window_seconds` of a job; later samples
// are ignored, so the profile is ready after the window and stays fixed. Values are clamped to
// [0, 100].
class Profiler {
 public:
  explicit Profiler(double window_seconds = 300) : window_(window_seconds) {}
  void add(const ProfileSample& s);
  // Whether a sample at or past the end of the window has been seen.
  bool complete() const { return complete_; }
  int samples() const { return samples_; }
  JobFeatures features() const { return peak_; }

 private:
  double window_;
  JobFeatures peak_;
  int samples_ = 0;
  bool complete_ = false;
};

}  // namespace tessera
