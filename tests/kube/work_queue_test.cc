// WorkQueue: tasks in FIFO order on a fixed pool; stop drops what is queued.
#include "control/kube/work_queue.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <mutex>
#include <thread>
#include <vector>

namespace tessera::kube {
namespace {

using namespace std::chrono_literals;

TEST(WorkQueue, OneThreadRunsTasksInTheOrderPushed) {
  WorkQueue q(1);
  std::mutex mu;
  std::vector<int> seen;
  std::promise<void> done;
  for (int i = 0; i < 50; ++i) {
    q.push([&, i] {
      std::lock_guard lock(mu);
      seen.push_back(i);
      if (i == 49) done.set_value();
    });
  }
  ASSERT_EQ(done.get_future().wait_for(10s), std::future_status::ready);
  std::lock_guard lock(mu);
  for (int i = 0; i < 50; ++i) EXPECT_EQ(seen[i], i);
}

TEST(WorkQueue, StopDropsWhatIsQueuedAndPushAfterStopIsIgnored) {
  WorkQueue q(1);
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::atomic<int> ran{0};
  std::promise<void> running;
  q.push([&] {
    running.set_value();
    released.wait();
    ++ran;
  });
  ASSERT_EQ(running.get_future().wait_for(10s), std::future_status::ready);
  for (int i = 0; i < 5; ++i) q.push([&] { ++ran; });
  std::thread stopper([&] { q.stop(); });
  // The worker is held, so only stop() empties the queue; release it after that.
  while (q.backlog() > 0) std::this_thread::sleep_for(1ms);
  release.set_value();
  stopper.join();
  q.push([&] { ++ran; });
  EXPECT_EQ(ran.load(), 1);
}

}  // namespace
}  // namespace tessera::kube
