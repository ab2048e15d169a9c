#include "backend/process_profiler.h"

#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <stdexcept>
#include <thread>

#include "backend/nvidia_smi.h"

namespace tessera {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

pid_t start_job(const ProfileRunOptions& opt) {
  if (opt.command.empty()) throw std::invalid_argument("profile: no command to run");
  std::vector<char*> argv;
  for (const std::string& a : opt.command) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const std::string visible = std::to_string(opt.gpu);
  const pid_t pid = fork();
  if (pid < 0) throw std::runtime_error("profile: fork failed");
  if (pid == 0) {
    // Its own process group, so stopping the job stops whatever it spawned.
    setpgid(0, 0);
    setenv("CUDA_VISIBLE_DEVICES", visible.c_str(), 1);
    execvp(argv[0], argv.data());
    _exit(127);
  }
  setpgid(pid, pid);
  return pid;
}

// Whether the job has ended; sets its exit status when it has.
bool reap(pid_t pid, bool block, int& status) {
  int st = 0;
  const pid_t r = waitpid(pid, &st, block ? 0 : WNOHANG);
  if (r != pid) return false;
  status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  return true;
}

void stop_job(pid_t pid) {
  kill(-pid, SIGTERM);
  int status = 0;
  const auto t0 = Clock::now();
  while (seconds_since(t0) < 5) {
    if (reap(pid, false, status)) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  kill(-pid, SIGKILL);
  reap(pid, true, status);
}

}  // namespace

ProfileRunResult profile_command(const ProfileRunOptions& opt) {
  if (!(opt.window_seconds > 0) || !(opt.interval_seconds > 0)) {
    throw std::invalid_argument("profile: window and interval must be positive");
  }
  ProfileRunResult out;
  Profiler profiler(opt.window_seconds);
  const auto t0 = Clock::now();
  const pid_t pid = start_job(opt);
  int status = 0;
  try {
    while (true) {
      const double t = seconds_since(t0);
      const std::vector<GpuReading> gpus = query_gpus(opt.nvidia_smi);
      const GpuReading* mine = nullptr;
      for (const GpuReading& g : gpus) mine = g.index == opt.gpu ? &g : mine;
      if (mine == nullptr) {
        throw std::runtime_error("profile: " + opt.nvidia_smi + " reports no GPU " +
                                 std::to_string(opt.gpu));
      }
      out.gpu_name = mine->name;
      const ProfileSample s{t, mine->util_gpu_pct, mine->memory_used_pct(), mine->util_mem_pct};
      out.counters_missing =
          out.counters_missing || s.gpu_util < 0 || s.mem_alloc < 0 || s.mem_time < 0;
      profiler.add(s);
      out.samples.push_back(s);
      if (profiler.complete()) break;
      if (reap(pid, false, status)) {
        out.job_exited = true;
        break;
      }
      std::this_thread::sleep_for(std::chrono::duration<double>(opt.interval_seconds));
    }
  } catch (...) {
    if (!out.job_exited) stop_job(pid);
    throw;
  }
  if (!out.job_exited) {
    if (opt.keep_running) {
      out.job_exited = reap(pid, true, status);
    } else {
      stop_job(pid);
    }
  }
  out.exit_status = out.job_exited ? status : 0;
  out.complete = profiler.complete();
  out.features = profiler.features();
  return out;
}

}  // namespace tessera
