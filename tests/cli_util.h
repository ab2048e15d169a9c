// Runs the tessera binary as a user would, for end-to-end tests.
#pragma once

#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

namespace tessera::testing {

struct CmdResult {
  int status;          // exit status; -1 if the process did not exit normally (a crash)
  std::string output;  // stdout and stderr together
};

// `tessera ARGS`, with ARGS as a shell would split them.
inline CmdResult run_tessera_cmd(const std::string& cmd) {
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return {-1, "cannot run " + cmd};
  std::string out;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  const int rc = pclose(p);
  return {WIFEXITED(rc) ? WEXITSTATUS(rc) : -1, out};
}

inline CmdResult run_tessera(const std::string& args) {
  return run_tessera_cmd(std::string(TESSERA_BINARY) + " " + args + " 2>&1");
}

// `ENV tessera ARGS`: ENV is a list of NAME=VALUE assignments for the shell.
inline CmdResult run_tessera_env(const std::string& env, const std::string& args) {
  return run_tessera_cmd(env + std::string(TESSERA_BINARY) + " " + args + " 2>&1");
}

// Whether the independent auditor (shared/tools/audit_events.py) and python3 are at hand.
inline bool auditor_available() {
  return std::filesystem::exists(std::string(TESSERA_TOOLS) + "/audit_events.py") &&
         std::system("python3 --version >/dev/null 2>&1") == 0;
}

// The auditor's exit status on an event log and its --json report (0: the audit passed).
inline int audit(const std::string& events, const std::string& json) {
  const std::string cmd = "python3 " + std::string(TESSERA_TOOLS) + "/audit_events.py " + events +
                          " " + json + " >/dev/null";
  return std::system(cmd.c_str());
}

// The last line of a command's output (a token, a job id), without its newline.
inline std::string last_line(std::string s) {
  while (!s.empty() && s.back() == '\n') s.pop_back();
  const size_t nl = s.rfind('\n');
  return nl == std::string::npos ? s : s.substr(nl + 1);
}

}  // namespace tessera::testing
