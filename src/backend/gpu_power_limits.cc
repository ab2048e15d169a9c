#include "backend/gpu_power_limits.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>
#include <array>
#include <cerrno>
#include <cmath>
#include <stdexcept>

#include "model/csv.h"

namespace tessera {

CommandResult run_command(const std::vector<std::string>& argv) {
  CommandResult out;
  if (argv.empty()) return CommandResult{127, "no command"};
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return CommandResult{127, "pipe failed"};
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    return CommandResult{127, "fork failed"};
  }
  if (pid == 0) {
    dup2(fds[1], STDOUT_FILENO);
    dup2(fds[1], STDERR_FILENO);
    execvp(args[0], args.data());
    _exit(127);
  }
  close(fds[1]);
  std::array<char, 4096> buf{};
  for (;;) {
    const ssize_t k = read(fds[0], buf.data(), buf.size());
    if (k > 0) {
      out.output.append(buf.data(), static_cast<size_t>(k));
    } else if (k == 0 || errno != EINTR) {
      break;
    }
  }
  close(fds[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  out.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return out;
}

std::vector<std::string> power_limits_query(const std::string& nvidia_smi) {
  return {nvidia_smi,
          "--query-gpu=index,power.limit,power.default_limit,power.min_limit,power.max_limit",
          "--format=csv,noheader,nounits"};
}

std::map<int, GpuPowerLimits> parse_power_limits(const std::string& text) {
  std::map<int, GpuPowerLimits> out;
  csv::LineReader lines(text);
  std::string_view line;
  std::vector<std::string_view> f;
  while (lines.next(line)) {
    if (csv::is_blank(line)) continue;
    csv::split(line, f);
    const auto bad = [&](const std::string& why) {
      return std::runtime_error(fmt::format("nvidia-smi power limits, line {}: {} ('{}')",
                                            lines.line_number(), why, line));
    };
    if (f.size() != 5) throw bad("expected 5 fields");
    int64_t index = 0;
    if (!csv::parse_int(csv::trim(f[0]), index) || index < 0) throw bad("bad index");
    std::array<double, 4> v{};
    for (size_t k = 0; k < 4; ++k) {
      const std::string_view s = csv::trim(f[k + 1]);
      if (s.starts_with("[") || s == "N/A") {
        v[k] = -1;
      } else if (!csv::parse_double(s, v[k]) || v[k] < 0) {
        throw bad("expected a number, got '" + std::string(s) + "'");
      }
    }
    out[static_cast<int>(index)] = GpuPowerLimits{v[0], v[1], v[2], v[3]};
  }
  return out;
}

std::map<int, GpuPowerLimits> power_limits(const std::string& nvidia_smi,
                                           const CommandRunner& run) {
  const CommandResult r = run(power_limits_query(nvidia_smi));
  if (r.exit_code != 0) {
    throw std::runtime_error(nvidia_smi + " cannot read the GPUs' power limits (exit code " +
                             std::to_string(r.exit_code) +
                             "): " + std::string(csv::trim(r.output)));
  }
  return parse_power_limits(r.output);
}

std::vector<std::string> set_power_limit_command(const std::string& nvidia_smi, int index,
                                                 double watts) {
  return {nvidia_smi, "-i", std::to_string(index), "-pl", fmt::format("{:.0f}", std::round(watts))};
}

}  // namespace tessera
