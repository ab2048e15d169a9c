#include "control/kube/work_queue.h"

#include <algorithm>

namespace tessera::kube {

WorkQueue::WorkQueue(int threads, double qps, int burst)
    : qps_(qps),
      tokens_(std::max(1, burst)),
      burst_(std::max(1, burst)),
      refilled_(std::chrono::steady_clock::now()) {
  for (int i = 0; i < std::max(1, threads); ++i) threads_.emplace_back([this] { run(); });
}

WorkQueue::~WorkQueue() {
  stop();
}

void WorkQueue::stop() {
  {
    std::lock_guard lock(mu_);
    if (stopping_ && threads_.empty()) return;
    stopping_ = true;
    tasks_.clear();
  }
  cv_.notify_all();
  for (std::thread& t : threads_) {
    if (t.joinable()) t.join();
  }
  threads_.clear();
}

void WorkQueue::push(std::function<void()> task) {
  {
    std::lock_guard lock(mu_);
    if (stopping_) return;
    tasks_.push_back(std::move(task));
  }
  cv_.notify_one();
}

size_t WorkQueue::backlog() const {
  std::lock_guard lock(mu_);
  return tasks_.size();
}

void WorkQueue::take_token(std::unique_lock<std::mutex>& lock) {
  if (qps_ <= 0) return;
  for (;;) {
    const auto now = std::chrono::steady_clock::now();
    tokens_ =
        std::min(burst_, tokens_ + std::chrono::duration<double>(now - refilled_).count() * qps_);
    refilled_ = now;
    if (tokens_ >= 1 || stopping_) break;
    const auto wait = std::chrono::duration<double>((1 - tokens_) / qps_);
    cv_.wait_for(lock, std::chrono::duration_cast<std::chrono::microseconds>(wait));
  }
  tokens_ -= 1;
}

void WorkQueue::run() {
  std::unique_lock lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return stopping_ || !tasks_.empty(); });
    if (stopping_) return;
    take_token(lock);
    if (stopping_ || tasks_.empty()) continue;
    std::function<void()> task = std::move(tasks_.front());
    tasks_.pop_front();
    lock.unlock();
    task();
    lock.lock();
  }
}

}  // namespace tessera::kube
