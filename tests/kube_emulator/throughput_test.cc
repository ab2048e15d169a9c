// Measures what a bare HTTP client gets from the emulator: pod creates/s and binds/s over
// keep-alive connections from several threads. Prints numbers; asserts only correctness.
// TESSERA_EMU_BENCH_PODS=N sizes the run (default 2000).
#include <atomic>
#include <cstdlib>

#include "kube_emulator/emulator_test_util.h"

namespace kube_emulator::testing {
namespace {

TEST(ThroughputTest, CreatesAndBindsPerSecond) {
  const char* env = std::getenv("TESSERA_EMU_BENCH_PODS");
  const int pods = env != nullptr ? std::atoi(env) : 2000;
  const int nodes = std::max(1, pods / 8);
  const int threads = 8;
  Options o = small_options(nodes, 8);
  o.kubelet.start_delay = std::chrono::milliseconds(100);
  Emulator emu(o);
  emu.start();
  const auto run = [&](const std::function<int(httplib::Client&, int)>& op) {
    std::atomic<int> next{0}, failures{0};
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<std::thread> ts;
    for (int t = 0; t < threads; ++t) {
      ts.emplace_back([&] {
        httplib::Client c("127.0.0.1", emu.port());
        c.set_keep_alive(true);
        c.set_tcp_nodelay(true);  // else Nagle + delayed ACK cost 40 ms per request
        for (int i = next++; i < pods; i = next++) {
          if (op(c, i) != 201) ++failures;
        }
      });
    }
    for (auto& t : ts) t.join();
    const double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_EQ(failures.load(), 0);
    return pods / secs;
  };
  const double creates = run([](httplib::Client& c, int i) {
    json p = pod_json("p-" + std::to_string(i), "1");
    auto r = c.Post("/api/v1/namespaces/default/pods", p.dump(), "application/json");
    return r ? r->status : -1;
  });
  const double binds = run([nodes](httplib::Client& c, int i) {
    char node[32];
    std::snprintf(node, sizeof node, "gpu-node-%04d", i % nodes);
    const std::string name = "p-" + std::to_string(i);
    auto r = c.Post(("/api/v1/namespaces/default/pods/" + name + "/binding").c_str(),
                    binding_json(name, node).dump(), "application/json");
    return r ? r->status : -1;
  });
  std::printf("[ emulator ] %d pods, %d nodes, %d client threads: %.0f creates/s, %.0f binds/s\n",
              pods, nodes, threads, creates, binds);
  EXPECT_TRUE(eventually([&] {
    auto l = emu.request("GET", "/api/v1/pods?fieldSelector=status.phase%3DRunning&limit=1");
    return l.status == 200 && !l.json_body()["items"].empty();
  }));
}

}  // namespace
}  // namespace kube_emulator::testing
