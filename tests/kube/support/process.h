// A process of a test's own: `tessera ARGS...` (a scheduler replica), its output appended to
// a log; SIGKILL on the way out, and when the test process dies.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <vector>

namespace tessera::kube::testing {

struct Process {
  pid_t pid = -1;
  Process(std::vector<std::string> args, const std::string& log) {
    args.insert(args.begin(), TESSERA_BINARY);
    pid = ::fork();
    if (pid == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
      ::dup2(fd, 2);
      ::dup2(fd, 1);
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execv(TESSERA_BINARY, argv.data());
      ::_exit(127);
    }
  }
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;
  void signal(int sig) {
    if (pid > 0) {
      ::kill(pid, sig);
      ::waitpid(pid, nullptr, 0);
      pid = -1;
    }
  }
  bool running() const { return pid > 0 && ::waitpid(pid, nullptr, WNOHANG) == 0; }
  ~Process() { signal(SIGKILL); }
};

}  // namespace tessera::kube::testing
