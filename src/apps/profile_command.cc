// tessera profile: runs a job on one GPU for its first minutes and reports its black-box
// profile (peak GPU utilisation, peak memory allocated, peak time accessing memory), the
// features the recommendation service clusters jobs by.
#include <fmt/format.h>

#include <fstream>
#include <iostream>

#include <nlohmann/json.hpp>

#include "apps/gpu_commands.h"
#include "backend/process_profiler.h"

namespace tessera {

CLI::App* add_profile_command(CLI::App& app, ProfileArgs& a) {
  CLI::App* s = app.add_subcommand(
      "profile",
      "Run a job on one GPU and report its black-box profile: tessera profile [options] -- CMD");
  s->add_option("--gpu", a.gpu, "GPU index (as nvidia-smi numbers it) the job runs on");
  s->add_option("--window", a.window, "seconds to profile (the job's first minutes)");
  s->add_option("--interval", a.interval, "seconds between samples");
  s->add_flag("--keep-running", a.keep_running,
              "let the job run on after the window and wait for it (default: stop it)");
  s->add_option("--nvidia-smi", a.nvidia_smi, "nvidia-smi binary (default: on PATH)");
  s->add_option("--json", a.json_out, "write the profile as JSON to this file");
  s->add_option("command", a.command, "the job's command line (after --)")->required();
  return s;
}

int run_profile(const ProfileArgs& a) {
  ProfileRunOptions opt;
  opt.command = a.command;
  opt.gpu = a.gpu;
  opt.window_seconds = a.window;
  opt.interval_seconds = a.interval;
  opt.keep_running = a.keep_running;
  opt.nvidia_smi = a.nvidia_smi;
  const ProfileRunResult r = profile_command(opt);
  const JobFeatures& f = r.features;
  nlohmann::ordered_json j;
  j["gpu"] = a.gpu;
  j["gpu_name"] = r.gpu_name;
  j["features"] = {{"MGUP", f.gpu_util}, {"MGMAP", f.mem_alloc}, {"MGTSAMP", f.mem_time}};
  j["samples"] = r.samples.size();
  j["complete"] = r.complete;
  j["job_exited"] = r.job_exited;
  if (r.job_exited) j["exit_status"] = r.exit_status;
  j["counters_missing"] = r.counters_missing;
  nlohmann::ordered_json series = nlohmann::ordered_json::array();
  for (const ProfileSample& s : r.samples) {
    series.push_back({s.t, s.gpu_util, s.mem_alloc, s.mem_time});
  }
  j["series"] = {{"columns", {"t", "gpu_util", "mem_alloc", "mem_time"}}, {"rows", series}};
  if (!a.json_out.empty()) {
    std::ofstream out(a.json_out);
    if (!out) throw std::runtime_error("cannot write " + a.json_out);
    out << j.dump(2) << '\n';
  }
  std::cout << fmt::format(
      "GPU {} ({}): {} samples over {}\n"
      "peak GPU utilisation (MGUP)          {:6.1f} %\n"
      "peak GPU memory allocated (MGMAP)    {:6.1f} %\n"
      "peak GPU time accessing memory (MGTSAMP) {:6.1f} %\n",
      a.gpu, r.gpu_name, r.samples.size(),
      r.complete ? fmt::format("the whole {:g} s window", a.window)
                 : fmt::format("{:.1f} s (the job ended before the window)",
                               r.samples.empty() ? 0.0 : r.samples.back().t),
      f.gpu_util, f.mem_alloc, f.mem_time);
  if (r.counters_missing) {
    std::cout << "note: the driver did not report some counters (e.g. under MIG); they count "
                 "as 0\n";
  }
  if (r.job_exited && r.exit_status != 0) {
    std::cout << fmt::format("note: the job exited with status {}\n", r.exit_status);
  }
  return 0;
}

}  // namespace tessera
