// Listening sockets besides the server's own, whose connections it serves all the same: those
// made inside jobs' network namespaces (backend/job_network.h), so that a job isolated from
// the host's network still reaches its TESSERA_REPORT_URL. One thread polls them all.
#pragma once

#include <functional>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "backend/unique_fd.h"

namespace tessera {

class ExtraListeners {
 public:
  // `serve` takes each accepted connection (and closes it in time).
  explicit ExtraListeners(std::function<void(int fd)> serve);
  ~ExtraListeners();  // stops the thread and closes the listeners' copies
  ExtraListeners(const ExtraListeners&) = delete;
  ExtraListeners& operator=(const ExtraListeners&) = delete;

  // Serves `fd`'s connections from now on. The pool keeps a copy of the descriptor, so the
  // caller may close its own at any time.
  void add(int fd);
  // Stops serving `fd` (the one given to add); its copy is closed by the pool's thread.
  void remove(int fd);
  size_t size() const;

 private:
  void loop();
  std::function<void(int)> serve_;
  mutable std::mutex mu_;
  std::map<int, UniqueFd> fds_;  // the caller's fd -> the pool's copy
  bool stopping_ = false;
  UniqueFd wake_;  // eventfd: the set changed, or stop
  std::thread thread_;
};

}  // namespace tessera
