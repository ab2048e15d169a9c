// A fixed pool of threads running queued tasks in FIFO order, optionally at most `qps` task
// starts per second (a token bucket, as client-go's rate limiter), so that a burst of status
// writes cannot flood the API server.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace tessera::kube {

class WorkQueue {
 public:
  // qps <= 0: no limit. burst: tokens the bucket holds.
  explicit WorkQueue(int threads, double qps = 0, int burst = 1);
  ~WorkQueue();  // drops what is still queued and waits for the running tasks
  WorkQueue(const WorkQueue&) = delete;
  WorkQueue& operator=(const WorkQueue&) = delete;

  void push(std::function<void()> task);
  size_t backlog() const;
  void stop();  // drops queued tasks and joins the threads

 private:
  void run();
  void take_token(std::unique_lock<std::mutex>& lock);

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;
  bool stopping_ = false;
  double qps_;
  double tokens_;
  double burst_;
  std::chrono::steady_clock::time_point refilled_;
  std::vector<std::thread> threads_;
};

}  // namespace tessera::kube
