// Profiles a job black-box, as the recommendation service needs it: runs the job's command on
// one GPU and samples that GPU's counters through nvidia-smi for the first minutes, keeping
// the peaks (insight/job_profile.h). Nothing about the job's model, data or batch is read.
//
// The profile is only meaningful when the job has the GPU to itself while it is taken (as in
// the study, a new job is profiled alone before it is co-located).
#pragma once

#include <string>
#include <vector>

#include "insight/job_profile.h"

namespace tessera {

struct ProfileRunOptions {
  std::vector<std::string> command;  // argv; run with CUDA_VISIBLE_DEVICES=gpu
  int gpu = 0;                       // index as nvidia-smi numbers it
  double window_seconds = 120;       // how long to profile
  double interval_seconds = 1;       // between samples
  std::string nvidia_smi = "nvidia-smi";
  // After the window: stop the job (SIGTERM to its process group, SIGKILL after 5 s), or let
  // it run to its end and wait for it.
  bool keep_running = false;
};

struct ProfileRunResult {
  JobFeatures features;
  std::vector<ProfileSample> samples;
  bool complete = false;          // sampled through the whole window
  bool job_exited = false;        // the job ended by itself (before the window, or after it
                                  // with keep_running)
  int exit_status = 0;            // its exit status when it ended by itself
  bool counters_missing = false;  // the driver did not report some counter (e.g. under MIG)
  std::string gpu_name;
};

// Throws std::runtime_error when the command cannot be started or nvidia-smi cannot read the
// GPU (the job is stopped first).
ProfileRunResult profile_command(const ProfileRunOptions& opt);

}  // namespace tessera
